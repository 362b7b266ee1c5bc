"""A run's state without widgets of its own: the run controller, the person's pending decisions (people) and breakpoints."""
