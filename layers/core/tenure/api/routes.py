"""Route facts shared by the API, the local front door and the template's checks."""

BASE = "/api/v1"
# Served without the authorizer (infra/template.yaml declares the same two routes).
PUBLIC_ROUTES = {("GET", f"{BASE}/health"), ("GET", f"{BASE}/openapi.json")}
