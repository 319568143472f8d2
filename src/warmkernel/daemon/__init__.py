"""One daemon per workspace: the daemon, how clients find it, its local socket, and the relay hosts launch."""
