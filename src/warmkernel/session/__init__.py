"""Session, the one door to a kernel, made of rooms; the workspace's named kernels; the journal."""
