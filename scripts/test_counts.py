"""Print the count of tests a run executed, skipped and failed, from its JUnit XML report,
as one closing line: ``tests: N passed, N failed, N skipped``."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ElementTree


def main(path: str) -> None:
    root = ElementTree.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    total = sum(int(s.get("tests", 0)) for s in suites)
    failed = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
    skipped = sum(int(s.get("skipped", 0)) for s in suites)
    print(f"tests: {total - failed - skipped} passed, {failed} failed, {skipped} skipped")


if __name__ == "__main__":
    main(sys.argv[1])
