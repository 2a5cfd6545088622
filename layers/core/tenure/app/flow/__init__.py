"""What flows between tasks: results handed downstream, and events a task waits for."""
