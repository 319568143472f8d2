"""The tool declarations: parameter kinds and the one catalog every face serves."""
