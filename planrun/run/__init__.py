"""The run path: from a request to a finished run (context, launch, scheduler, events, resume)."""
