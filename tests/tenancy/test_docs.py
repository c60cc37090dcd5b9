"""docs/tenancy.md states the role table exactly as the code has it."""

from __future__ import annotations

from pathlib import Path

from modelport.tenancy.policy import ROLE_PERMISSIONS, Permission

DOC = Path(__file__).resolve().parents[2] / "docs" / "tenancy.md"


def test_the_documented_role_table_is_the_real_one() -> None:
    lines = DOC.read_text().splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| permission | admin"))
    roles = [c.strip() for c in lines[header].strip("|").split("|")][1:]
    assert sorted(roles) == sorted(ROLE_PERMISSIONS)
    documented: dict[str, set[str]] = {role: set() for role in roles}
    rows = 0
    for line in lines[header + 2 :]:
        if not line.startswith("| `"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        permission = cells[0].strip("`")
        rows += 1
        for role, cell in zip(roles, cells[1:], strict=True):
            if cell == "✓":
                documented[role].add(permission)
    assert rows == len(Permission)
    for role, permissions in ROLE_PERMISSIONS.items():
        assert documented[role] == {p.value for p in permissions}, role
