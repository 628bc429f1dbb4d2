"""The `planrun` command line: thin click commands over the library."""
