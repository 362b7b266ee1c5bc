"""Stand-alone dialogs any panel may open: credentials and prices."""
