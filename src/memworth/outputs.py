"""Files the CLI writes for a user (``--out``, ``--state``): checked before the work, written whole or not at all.

A command that writes a file checks where it goes before it reads or computes anything
(:func:`file_to_write`, :func:`folder_to_write`), so a path that cannot be written is
refused at once, naming the option, instead of after minutes of work or with a
traceback. The file itself is written to a temporary name beside it and renamed over the
path only when complete (:func:`written_whole`): a run that fails half way leaves the
old file, or none, never half of a new one.

Examples
--------
>>> import pathlib, tempfile
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> with written_whole(folder / "out.txt", "out") as part:
...     _ = part.write_text("all of it")
>>> (folder / "out.txt").read_text(), sorted(p.name for p in folder.iterdir())
('all of it', ['out.txt'])
>>> file_to_write(folder / "missing" / "out.txt", "out")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
memworth.errors.ValidationError: out: cannot write .../missing/out.txt: the folder .../missing does not exist
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

from memworth.errors import ValidationError

__all__ = ["file_to_write", "folder_to_write", "written_whole"]


def file_to_write(path: str | os.PathLike[str], field: str) -> Path:
    """``path`` as a :class:`~pathlib.Path` if a file can be written there (its folder exists
    and is writable, and it is not itself a folder); else :class:`ValidationError` naming ``field``."""
    target = Path(path)
    if target.is_dir():
        raise ValidationError(field, f"cannot write {target}: it is a folder; give a file name")
    if _special(target) is not None:  # a pipe, a terminal, a device: written in place
        if not os.access(target, os.W_OK):
            raise ValidationError(field, f"cannot write {target}: not writable")
        return target
    folder = Path(os.path.realpath(target)).parent
    if not folder.exists():
        raise ValidationError(field, f"cannot write {target}: the folder {folder} does not exist")
    if not folder.is_dir():
        raise ValidationError(field, f"cannot write {target}: {folder} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValidationError(field, f"cannot write {target}: the folder {folder} is not writable")
    return target


def folder_to_write(path: str | os.PathLike[str], field: str) -> Path:
    """``path`` as a :class:`~pathlib.Path` if it is a writable folder or one that can be made
    (its nearest existing ancestor is a writable folder); else :class:`ValidationError` naming ``field``."""
    target = Path(path)
    if target.exists():
        if not target.is_dir():
            raise ValidationError(field, f"cannot write into {target}: it is a file, not a folder")
        if not os.access(target, os.W_OK | os.X_OK):
            raise ValidationError(field, f"cannot write into {target}: the folder is not writable")
        return target
    ancestor = target.absolute().parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ValidationError(field, f"cannot make the folder {target}: {ancestor} is a file")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise ValidationError(field, f"cannot make the folder {target}: {ancestor} is not writable")
    return target


def _special(path: Path) -> os.stat_result | None:
    """``path``'s status if it is something other than a regular file or a folder (a pipe such
    as ``>(gzip > log.gz)``, a terminal, a device, through any symlink), else ``None``."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return None if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) else st


@contextlib.contextmanager
def written_whole(path: str | os.PathLike[str], field: str) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it over ``path`` when the block ends
    without an error, delete it when it raises. An operating-system error (disk full, no
    permission) becomes :class:`ValidationError` naming ``field``; the old file stays.

    A symlink stays a link (the file it names is replaced), and a file that exists keeps
    its permissions (a new one gets the umask's, as ``open`` gives). A pipe, a terminal or a
    device (``--out /dev/stdout``, ``--out >(gzip > log.gz)``) has nothing to rename over:
    it is written in place, as it streams.
    """
    target = file_to_write(path, field)
    try:
        if _special(target) is not None:
            yield target
            return
        real = Path(os.path.realpath(target))
        try:
            mode = stat.S_IMODE(os.stat(real).st_mode)
        except FileNotFoundError:
            mode = None
        part = real.parent / f".{real.name}.{secrets.token_hex(6)}.part"
        # made as open() makes a file (the umask decides its mode), never over another's
        os.close(os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if mode is None else 0o600))
    except OSError as exc:
        raise ValidationError(field, f"cannot write {target}: {exc.strerror or exc}") from None
    try:
        yield part
        if mode is not None:
            os.chmod(part, mode)
        os.replace(part, real)
    except OSError as exc:
        raise ValidationError(field, f"cannot write {target}: {exc.strerror or exc}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            part.unlink()
