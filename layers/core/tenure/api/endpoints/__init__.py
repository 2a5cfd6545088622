"""One module of routes per resource; importing them registers them on the resolver."""
