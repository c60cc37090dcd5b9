"""Names of registry things: owners, models, versions, aliases, tags, and ``owner/name:ref``."""

from __future__ import annotations

import re

from modelport.errors import InvalidInput

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
OWNER_MAX = 64
NAME_MAX = 128
VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
ALIAS_RE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
TAG_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
TASK_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


def check_owner(owner: str) -> str:
    return _check_name(owner, "owner", OWNER_MAX)


def check_model_name(name: str) -> str:
    return _check_name(name, "name", NAME_MAX)


def _check_name(value: str, label: str, limit: int) -> str:
    if not isinstance(value, str) or not (1 <= len(value) <= limit) or not NAME_RE.match(value):
        raise InvalidInput(
            f"invalid model {label} {value!r}: 1-{limit} lowercase letters, digits, "
            "'-', '_' or '.', starting with a letter or digit",
            code="invalid_model_name",
            field=label,
        )
    return value


def check_version(version: str) -> str:
    if not isinstance(version, str) or not VERSION_RE.match(version):
        raise InvalidInput(
            f"invalid version {version!r}: 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit",
            code="invalid_version",
            field="version",
        )
    return version


def check_alias(alias: str) -> str:
    """Aliases start with a letter, so a purely numeric ref is never an alias."""
    if not isinstance(alias, str) or not ALIAS_RE.match(alias):
        raise InvalidInput(
            f"invalid alias {alias!r}: 1-64 lowercase letters, digits, '_' or '-', "
            "starting with a letter",
            code="invalid_alias",
            field="alias",
        )
    return alias


def check_tags(tags: list[str]) -> tuple[str, ...]:
    """Validate tags; duplicates collapse and the order is sorted."""
    if len(tags) > 64:
        raise InvalidInput("at most 64 tags", code="invalid_tag", field="tags")
    for tag in tags:
        if not isinstance(tag, str) or not TAG_RE.match(tag):
            raise InvalidInput(
                f"invalid tag {tag!r}: 1-64 lowercase letters, digits, '.', '_' or '-'",
                code="invalid_tag",
                field="tags",
            )
    return tuple(sorted(set(tags)))


def check_task(task: str) -> str:
    if task and not TASK_RE.match(task):
        raise InvalidInput(
            f"invalid task {task!r}: 1-64 lowercase letters, digits, '.', '_' or '-'",
            code="invalid_task",
            field="task",
        )
    return task


def split_model_ref(ref: str) -> tuple[str, str]:
    """``owner/name`` -> (owner, name), both validated."""
    owner, sep, name = ref.partition("/")
    if not sep:
        raise InvalidInput(
            f"invalid model reference {ref!r}: expected 'owner/name'", code="invalid_model_name"
        )
    return check_owner(owner), check_model_name(name)


def split_version_ref(ref: str) -> tuple[str, str, str | None]:
    """``owner/name[:ref]`` -> (owner, name, ref or None)."""
    model, sep, version = ref.partition(":")
    owner, name = split_model_ref(model)
    return owner, name, (version if sep else None)
