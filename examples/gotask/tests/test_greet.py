import tempfile
import unittest
from pathlib import Path

from greet import greeting, log_greeting


class GreetingTest(unittest.TestCase):
    def test_greets_by_name(self):
        self.assertEqual(greeting("Ada"), "Hello, Ada!")

    def test_a_blank_name_greets_the_world(self):
        self.assertEqual(greeting("  "), "Hello, world!")

    def test_greetings_are_logged(self):
        # Left behind in TMPDIR on purpose (to look at after a failure): the build points
        # TMPDIR at build/tmp and removes that directory when the tests are done.
        log = Path(tempfile.mkdtemp(prefix="greet-")) / "greetings.log"
        log_greeting("Ada", log)
        log_greeting("Grace", log)
        self.assertEqual(log.read_text().splitlines(), ["Hello, Ada!", "Hello, Grace!"])
