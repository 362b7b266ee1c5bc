"""Running on the window: the run session (run_integration), debugging, reruns, pins, queue mode's views and remote run windows, serving as MCP."""
