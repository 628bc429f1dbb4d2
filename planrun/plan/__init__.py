"""The plan format: its one definition, loading, validation, variables and selection."""
