"""What a package's files contain, whatever their names: code-bearing contents are refused.

Loading a pickle runs whatever code it names, so a package whose files carry one
exposes everyone who pulls it. Files are sniffed by content, never by name or by the
manifest's ``format``; ``find_unsafe`` reads a bounded amount of each blob through
ranged reads (the head, and for a zip archive its central directory and the head of
each member). What is detected:

- a **pickle** stream, any protocol: the file parses as pickle opcodes with a
  consistent stack (no pop from an empty stack or past a mark, no read of an unset
  memo slot) up to an import of a global (``GLOBAL``, ``STACK_GLOBAL``, ``INST``
  naming a well-formed module and name) that is then called (``REDUCE``,
  ``NEWOBJ``, ``OBJ``, ``BUILD`` of such an object) or followed by a clean
  ``STOP``. The parse starts on the head and goes on through further reads of the
  file, skipping over long arguments (at most ``MAX_WINDOWS`` reads; a stream still
  valid then is taken for a pickle), so padding cannot push the call out of sight.
  Every loadable pickle that runs code passes this check; arbitrary binary (ONNX
  protobufs, safetensors, GGUF, raw tensors) and text fail it within a few bytes. A
  pickle of plain data that opens with a protocol marker (``PROTO`` 2 or more, what
  every writer of the last fifteen years produces) and ends where the file ends is
  refused too, though it imports nothing: a package is no place for pickles, and its
  consumers would unpickle it. Without the marker (protocols 0 and 1) only an import
  makes a stream a pickle, since short text can parse as plain data. This covers PyTorch's legacy format (several pickles in a row), plain
  ``pickle``/``joblib``/``cloudpickle``/``dill`` dumps and scikit-learn models;
- the same inside a **gzip, zlib, bzip2 or xz** stream (joblib's compressed dumps):
  the head is decompressed (up to ``HEAD_BYTES``) and sniffed, and a stream cut off
  there with an argument that fits is taken for a pickle;
- a **zip archive** (starting with ``PK``, or found by its end record) with a member
  named ``*.pkl``, ``*.pickle`` or ``*.joblib`` (PyTorch's zip format and TorchScript
  keep ``data.pkl``), or a member whose contents are any of these (nested archives
  to ``MAX_DEPTH``). An archive that cannot be read (broken, encrypted members, more
  than ``MAX_MEMBERS`` members) is refused too: it cannot be shown to be safe;
- a **NumPy** ``.npy`` array (alone or in an ``.npz`` archive) of an object dtype,
  which NumPy stores as a pickle;
- a **Keras 3** ``.keras`` archive whose ``config.json`` has a ``Lambda`` layer or a
  serialized lambda (Python bytecode).

Not detected: Lambda layers in legacy Keras HDF5 (``.h5``) files (that needs an HDF5
parser), archives other than zip (tar), and streams compressed otherwise (zstd, lz4).
Such packages are of formats the platform does not run, which cannot be approved
without an operator's decision (see ``modelport.registry.formats``).
"""

from __future__ import annotations

import ast
import bz2
import io
import json
import lzma
import pickletools
import re
import struct
import warnings
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from modelport.blobs import BlobStore

HEAD_BYTES = 64 * 1024
"""How much of a file (or decompressed stream, or NumPy array in an archive) is sniffed."""
MEMBER_HEAD_BYTES = 4096
"""How much of each zip member is sniffed: archives may have thousands (PyTorch keeps
one per tensor storage), and a pickle shows itself in its first opcodes."""
MAX_MEMBERS = 10_000
MAX_DEPTH = 3
MAX_KERAS_CONFIG = 16 * 1024 * 1024
PICKLE_SUFFIXES = (".pkl", ".pickle", ".joblib")
_NUMPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
_ZLIB_CMF = frozenset({0x08, 0x18, 0x28, 0x38, 0x48, 0x58, 0x68, 0x78})
_LINE_ARG_MAX = 1024
_IDENTIFIER_LINE = re.compile(rb"^[A-Za-z0-9_.]*$")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


@dataclass(frozen=True)
class Finding:
    """Why a file's contents are refused."""

    kind: str
    """``pickle``, ``numpy_object_array``, ``keras_lambda`` or ``unreadable_archive``."""
    detail: str
    member: str | None = None
    """The archive member at fault, as ``a.zip!inner/data.pkl`` for nested ones."""


# ---- the entry point


def find_unsafe(blobs: BlobStore, digest: str, size: int) -> Finding | None:
    """The first code-bearing content of a stored blob, or None when none is found."""
    raw = _BlobReader(blobs, digest, size)
    with io.BufferedReader(raw, buffer_size=MEMBER_HEAD_BYTES * 4) as f:
        return _sniff_file(f, size, depth=0)


def sniff_bytes(data: bytes) -> Finding | None:
    """``find_unsafe`` for bytes in memory."""
    return _sniff_file(io.BytesIO(data), len(data), depth=0)


def sniff_path(path: Path) -> Finding | None:
    """``find_unsafe`` for a local file (what ``push --dry-run`` checks before upload)."""
    with path.open("rb") as f:
        return _sniff_file(f, path.stat().st_size, depth=0)


class _BlobReader(io.RawIOBase):
    """A seekable file over a blob's ranged reads: only what is read is fetched."""

    def __init__(self, blobs: BlobStore, digest: str, size: int) -> None:
        self._blobs = blobs
        self._digest = digest
        self._size = size
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        end = min(self._size, self._pos + len(view))
        if end <= self._pos:
            return 0
        got = 0
        for chunk in self._blobs.read(self._digest, self._pos, end):
            view[got : got + len(chunk)] = chunk
            got += len(chunk)
        self._pos += got
        return got


# ---- one file (or member)


def _reader(f: IO[bytes]) -> Reader:
    def read(offset: int, n: int) -> bytes:
        f.seek(offset)
        return f.read(n)

    return read


def _sniff_file(f: IO[bytes], size: int, *, depth: int) -> Finding | None:
    f.seek(0)
    head = f.read(HEAD_BYTES)
    if head.startswith(_ZIP_MAGICS):
        return _sniff_zip(f, depth=depth, required=True)
    found = _sniff_head(head, size, depth=depth, read=_reader(f))
    if found is not None:
        return found
    if size >= 22 and depth < MAX_DEPTH:
        # A zip may follow other bytes: readers find it by the end record.
        return _sniff_zip(f, depth=depth, required=False)
    return None


def _sniff_head(
    head: bytes, size: int, *, depth: int, read: Reader | None = None
) -> Finding | None:
    """Pickle, NumPy object arrays and compressed pickles, from a file's first bytes
    (and, for a pickle, what ``read`` reads beyond them)."""
    if head.startswith(_NUMPY_MAGIC):
        return _sniff_npy(head)
    if is_pickle(head, size, read):
        return Finding("pickle", "a pickle stream (loading it runs the code it names)")
    decompressed = _decompress_head(head)
    if decompressed is not None and depth < MAX_DEPTH:
        data, whole = decompressed
        found = _sniff_head(data, len(data) if whole else len(data) + 1, depth=depth + 1)
        if found is not None:
            return Finding(found.kind, f"compressed: {found.detail}", found.member)
    return None


# ---- pickle


Reader = Callable[[int, int], bytes]
"""``read(offset, n)``: up to ``n`` bytes of a file from ``offset``."""


def is_pickle(head: bytes, size: int, read: Reader | None = None) -> bool:
    """Whether a ``size``-byte file starting with ``head`` is a pickle stream that imports
    something and calls it, or ends cleanly after an import or a protocol marker.

    With ``read``, the parse goes on past the head as far as the stream stays valid,
    skipping over long arguments (at most ``MAX_WINDOWS`` reads; a stream still valid
    then is taken for a pickle). Without it, a stream cut off by the end of the head
    with an argument that fits in the file is taken for one. A pickle of plain data is
    read on past its ``STOP``: PyTorch's legacy files are several pickles in a row."""
    with warnings.catch_warnings():  # arguments decoded from arbitrary bytes may warn
        warnings.simplefilter("ignore")
        return _Parse(head, size, read).run()


MAX_WINDOWS = 64
_OPCODES: dict[str, pickletools.OpcodeInfo] = {op.code: op for op in pickletools.opcodes}
_MAX_LINE_SCAN = 1 << 20
_LONG_LINES = frozenset({"UNICODE", "PERSID", "STRING"})


class _Parse:
    """One walk over a pickle stream through windows of the file."""

    def __init__(self, head: bytes, size: int, read: Reader | None) -> None:
        self.size = size
        self.read = read
        self.windows = 0
        self._window(0, head)

    def _window(self, base: int, data: bytes) -> None:
        self.base = base
        self.buf = data
        self.stream = io.BytesIO(data)

    def _move(self, offset: int) -> bool:
        """Read the window at ``offset``; False when no more may be read."""
        assert self.read is not None
        self.windows += 1
        if self.windows > MAX_WINDOWS:
            return False
        self._window(offset, self.read(offset, HEAD_BYTES))
        return True

    def run(self) -> bool:
        stack: list[_Item] = []
        memo: dict[int, _Item] = {}
        count = 0
        start = 0
        imported = False
        marked = False  # the stream opened with a protocol marker of 2 or more
        while True:
            position = self.base + self.stream.tell()
            code = self.stream.read(1)
            if not code:  # the window ended between opcodes
                if position >= self.size:
                    return False  # the file ended without a STOP
                if self.read is None:
                    return imported or count >= 2
                if not self._move(position):
                    return True  # still a valid stream after that many reads
                continue
            op = _OPCODES.get(code.decode("latin-1"))
            if op is None:
                return False
            arg: Any = None
            if op.arg is not None:
                try:
                    arg = op.arg.reader(self.stream)
                except (ValueError, OverflowError, struct.error):
                    if self.read is None:
                        return count >= 1 and _cut_off(
                            op, self.buf, position - self.base, self.size
                        )
                    resume = self._past_argument(op, position)
                    if resume is None:
                        return False
                    if resume is True:
                        return True
                    if resume == position:  # the window moved to the opcode: parse it again
                        continue
                    arg = _SKIPPED
            count += 1
            if op.name == "PROTO" and (position != start or not 0 <= arg <= 5):
                return False
            if op.name == "PROTO" and arg >= 2:
                marked = True
            effect = _apply(op, arg, stack, memo)
            if effect is None:
                return False
            if effect == "call":
                return True  # an unpickler runs code here, whatever follows
            imported = imported or effect == "import"
            if op.name == "STOP":
                if imported:
                    return True
                if marked and self.base + self.stream.tell() == self.size:
                    return True  # a whole file of plain data, as pickle.dump writes it
                # Plain data so far: another pickle may follow.
                stack.clear()
                memo.clear()
                start = self.base + self.stream.tell()

    def _past_argument(self, op: pickletools.OpcodeInfo, position: int) -> int | bool | None:
        """Where parsing resumes after the opcode at ``position`` whose argument did not
        parse in this window: ``position`` (a window now starts there), the offset past a
        long argument (the window starts there), None when the bytes are not a pickle
        (the argument is malformed, or runs past the end of the file), True when it
        cannot be told within the reads allowed."""
        assert op.arg is not None
        at = position + 1 - self.base  # where the argument starts, in the window
        window_end = self.base + len(self.buf)
        if window_end >= self.size:
            return None  # the whole rest of the file was there
        n = op.arg.n
        if n > 0 or (n != pickletools.UP_TO_NEWLINE and len(self.buf) - at < _LENGTH_PREFIX[n][1]):
            # A fixed-size argument, or a length prefix, cut by the window's end.
            if position == self.base or (n > 0 and at + n <= len(self.buf)):
                return None
            return position if self._move(position) else True
        if n == pickletools.UP_TO_NEWLINE:
            if b"\n" in self.buf[at:]:
                return None
            if op.name not in _LONG_LINES:
                if len(self.buf) - at > _LINE_ARG_MAX or position == self.base:
                    return None
                return position if self._move(position) else True
            newline = self._find_newline(window_end)
            if newline is None:
                return True
            if newline < 0:
                return None  # the line runs to the end of the file
            return newline + 1 if self._move(newline + 1) else True
        fmt, width = _LENGTH_PREFIX[n]
        (length,) = struct.unpack(fmt, self.buf[at : at + width])
        end = position + 1 + width + length
        if length < 0 or end <= window_end or end > self.size:
            return None
        if end - position <= HEAD_BYTES and position != self.base:
            return position if self._move(position) else True
        return end if self._move(end) else True

    def _find_newline(self, offset: int) -> int | None:
        """The offset of the next newline from ``offset``; -1 when the file ends first;
        None when it is not found within the reads allowed."""
        assert self.read is not None
        scanned = 0
        while offset < self.size:
            self.windows += 1
            if self.windows > MAX_WINDOWS or scanned >= _MAX_LINE_SCAN:
                return None
            chunk = self.read(offset, HEAD_BYTES)
            if not chunk:
                break
            found = chunk.find(b"\n")
            if found >= 0:
                return offset + found
            offset += len(chunk)
            scanned += len(chunk)
        return -1


_SKIPPED = object()
"""The argument of an opcode whose argument was skipped over (a long string or bytes)."""


class _Item:
    """A stack entry: a mark, or an object of a kind (a string's value is kept)."""

    __slots__ = ("kind", "value")

    def __init__(self, kind: str, value: object = None) -> None:
        self.kind = kind
        self.value = value


_MARK = _Item("mark")
_STRINGS = frozenset({"str", "bytes_or_str"})
_CALLABLE = frozenset({"global", "called"})
_CALLS = frozenset({"REDUCE", "NEWOBJ", "NEWOBJ_EX", "OBJ", "INST", "BUILD"})


def _apply(
    op: pickletools.OpcodeInfo, arg: Any, stack: list[_Item], memo: dict[int, _Item]
) -> str | None:
    """Apply the opcode's stack effect. None where a real unpickler fails; ``"import"``
    where it imports a global (a well-formed module and name); ``"call"`` where it calls
    an imported object (or one made by such a call); else ``""``."""
    name = op.name
    before = op.stack_before
    mark = pickletools.markobject in before
    if mark or (name == "POP" and stack and stack[-1] is _MARK):
        if _MARK not in stack:
            return None
        top = len(stack) - 1 - stack[::-1].index(_MARK)
        sliced = stack[top + 1 :]
        del stack[top:]
        popped = _pop(stack, before.index(pickletools.markobject) if mark else 0)
    else:
        sliced = []
        popped = _pop(stack, len(before))
    if popped is None:
        return None
    if name in ("GLOBAL", "INST", "STACK_GLOBAL"):
        if name == "STACK_GLOBAL":
            parts = [str(i.value) for i in popped if i.kind in _STRINGS]
        else:
            parts = arg.split(" ", 1)
        if len(parts) != 2 or not all(_IDENTIFIER.match(part) for part in parts):
            return None
        stack.append(_Item("called" if name == "INST" else "global"))
        return "call" if name == "INST" else "import"
    if name in _CALLS:
        calls = _calls(name, popped, sliced)
        stack.append(_Item("called" if calls else "any"))
        return "call" if calls else ""
    if name in ("PUT", "BINPUT", "LONG_BINPUT"):
        if not stack or stack[-1] is _MARK:
            return None
        memo[arg] = stack[-1]
    elif name == "MEMOIZE":
        memo[len(memo)] = popped[0]
        stack.append(popped[0])
    elif name in ("GET", "BINGET", "LONG_BINGET"):
        if arg not in memo:
            return None
        stack.append(memo[arg])
    elif name == "DUP":
        stack.extend(popped * 2)
    else:
        value = arg if isinstance(arg, str) else None
        for item in op.stack_after:
            stack.append(_MARK if item is pickletools.markobject else _Item(item.name, value))
    return ""


def _calls(name: str, popped: list[_Item], sliced: list[_Item]) -> bool:
    """Whether this call op's callable came from an import, with arguments an unpickler
    accepts (so a text file that happens to parse this far is not taken for one)."""
    if name == "OBJ":
        return bool(sliced) and sliced[0].kind in _CALLABLE
    if name == "BUILD":
        return popped[0].kind == "called"
    callable_, args = popped[0], popped[1]
    return callable_.kind in _CALLABLE and args.kind == "tuple"


def _pop(stack: list[_Item], n: int) -> list[_Item] | None:
    if n == 0:
        return []
    if len(stack) < n or any(item is _MARK for item in stack[-n:]):
        return None
    popped = stack[-n:]
    del stack[-n:]
    return popped


_LENGTH_PREFIX = {-2: ("<B", 1), -3: ("<i", 4), -4: ("<I", 4), -5: ("<Q", 8)}


def _cut_off(op: pickletools.OpcodeInfo, head: bytes, position: int, size: int) -> bool:
    """Whether the argument that failed to parse at ``position`` was cut off by the end
    of the head, and would fit in the rest of the file (else the bytes are not a pickle)."""
    assert op.arg is not None
    if size <= len(head):
        return False
    rest = head[position + 1 :]
    n = op.arg.n
    if n > 0:
        return len(rest) < n
    if n == pickletools.UP_TO_NEWLINE:
        if b"\n" in rest:
            return False
        if op.name in ("UNICODE", "PERSID"):
            return True
        if op.name == "STRING":
            return rest[:1] in (b"", b"'", b'"')
        if len(rest) > _LINE_ARG_MAX:
            return False
        return op.name not in ("GLOBAL", "INST") or bool(_IDENTIFIER_LINE.match(rest))
    fmt, width = _LENGTH_PREFIX[n]
    if len(rest) < width:
        return True
    length: int = struct.unpack(fmt, rest[:width])[0]
    end = position + 1 + width + length
    return len(head) < end <= size


# ---- compressed streams


def _decompress_head(head: bytes) -> tuple[bytes, bool] | None:
    """Up to ``HEAD_BYTES`` of a gzip/zlib/bzip2/xz stream's contents and whether that
    is all of it; None when ``head`` starts no such stream or it does not decompress."""
    factory: Callable[[], Any]
    if head.startswith(b"\x1f\x8b"):
        factory = lambda: zlib.decompressobj(16 + zlib.MAX_WBITS)  # noqa: E731
    elif len(head) >= 2 and head[0] in _ZLIB_CMF and (head[0] << 8 | head[1]) % 31 == 0:
        factory = zlib.decompressobj
    elif head.startswith(b"BZh"):
        factory = bz2.BZ2Decompressor
    elif head.startswith(b"\xfd7zXZ\x00"):
        factory = lzma.LZMADecompressor
    else:
        return None
    decompressor = factory()
    try:
        if isinstance(decompressor, (bz2.BZ2Decompressor, lzma.LZMADecompressor)):
            data = decompressor.decompress(head, max_length=HEAD_BYTES)
            whole = decompressor.eof
        else:
            data = decompressor.decompress(head, HEAD_BYTES)
            whole = decompressor.eof
    except (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError):
        return None
    return (data, whole) if data else None


# ---- NumPy


def _sniff_npy(head: bytes) -> Finding | None:
    if not _npy_has_objects(head):
        return None
    return Finding(
        "numpy_object_array",
        "a NumPy array of an object dtype (stored as a pickle; loading it runs code)",
    )


def _npy_has_objects(head: bytes) -> bool:
    """Whether an ``.npy`` header declares an object dtype (an unreadable one counts)."""
    try:
        major = head[6]
        if major == 1:
            (length,) = struct.unpack("<H", head[8:10])
            text = head[10 : 10 + length]
        else:
            (length,) = struct.unpack("<I", head[8:12])
            text = head[12 : 12 + length]
        header = ast.literal_eval(text.decode("utf-8" if major >= 3 else "latin-1"))
        import numpy as np

        return bool(np.lib.format.descr_to_dtype(header["descr"]).hasobject)
    except Exception:  # a header NumPy itself cannot read: not shown to be safe
        return True


# ---- zip archives


def _sniff_zip(f: IO[bytes], *, depth: int, required: bool) -> Finding | None:
    """Members of a zip archive. ``required``: the file starts like one, so an archive
    that cannot be read is refused; otherwise such a file is simply not a zip."""
    try:
        archive = zipfile.ZipFile(f)
    except (zipfile.BadZipFile, ValueError, EOFError, struct.error):
        if required:
            return Finding("unreadable_archive", "a zip archive that cannot be read")
        return None
    with archive:
        infos = archive.infolist()
        if len(infos) > MAX_MEMBERS:
            return Finding(
                "unreadable_archive",
                f"a zip archive of {len(infos)} members (at most {MAX_MEMBERS} are inspected)",
            )
        try:
            return _sniff_members(archive, infos, depth=depth)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, RuntimeError, zlib.error):
            return Finding("unreadable_archive", "a zip archive whose members cannot be read")
        except NotImplementedError:  # a compression method Python does not know
            return Finding("unreadable_archive", "a zip archive of an unknown compression")


def _sniff_members(
    archive: zipfile.ZipFile, infos: list[zipfile.ZipInfo], *, depth: int
) -> Finding | None:
    names = {info.filename for info in infos}
    for info in infos:
        if info.is_dir():
            continue
        if info.filename.lower().endswith(PICKLE_SUFFIXES):
            return Finding("pickle", "a pickle in a zip archive", info.filename)
        if info.flag_bits & 0x1:
            return Finding(
                "unreadable_archive", "an encrypted member of a zip archive", info.filename
            )
        found = _sniff_member(archive, info, depth=depth)
        if found is not None:
            member = info.filename + (f"!{found.member}" if found.member else "")
            return Finding(found.kind, f"{found.detail}, in a zip archive", member)
    if "config.json" in names and "metadata.json" in names:
        return _sniff_keras(archive)
    return None


def _sniff_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, *, depth: int) -> Finding | None:
    with archive.open(info) as member:
        head = member.read(MEMBER_HEAD_BYTES)
        if head.startswith(_NUMPY_MAGIC):  # its header may be longer
            head += member.read(HEAD_BYTES - len(head))
        if head.startswith(_ZIP_MAGICS) and depth + 1 < MAX_DEPTH:
            return _sniff_zip(member, depth=depth + 1, required=True)
        return _sniff_head(head, info.file_size, depth=depth + 1, read=_reader(member))


def _sniff_keras(archive: zipfile.ZipFile) -> Finding | None:
    """A Keras 3 archive's config: Lambda layers carry marshalled Python bytecode."""
    info = archive.getinfo("config.json")
    if info.file_size > MAX_KERAS_CONFIG:
        return Finding("unreadable_archive", "a Keras config too large to inspect", "config.json")
    try:
        config = json.loads(archive.read(info))
    except ValueError:
        return Finding("unreadable_archive", "a Keras config that is not JSON", "config.json")
    if _has_lambda(config):
        return Finding(
            "keras_lambda",
            "a Keras model with a Lambda layer (Python bytecode run when loaded)",
            "config.json",
        )
    return None


def _has_lambda(node: Any) -> bool:
    pending = [node]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            if item.get("class_name") in ("Lambda", "__lambda__"):
                return True
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False
