"""greet: say hello, and keep a log of who was greeted."""

from pathlib import Path


def greeting(name: str, punctuation: str = "!") -> str:
    """The greeting for `name`."""
    return f"Hello, {name.strip() or 'world'}{punctuation}"


def log_greeting(name: str, log: Path) -> str:
    """Greet `name` and append the greeting to the file `log`."""
    text = greeting(name)
    with log.open("a", encoding="utf-8") as f:
        f.write(text + "\n")
    return text
