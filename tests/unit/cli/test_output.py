"""ui.Output: text written after the pipe's reader left is dropped (the work goes on); bytes stop (ReaderLeft)."""

from __future__ import annotations

import os

import pytest

from cloudvault.cli.ui import Output, ReaderLeft


def _closed_pipe():
    """A text stream on a pipe whose reader has gone."""
    read, write = os.pipe()
    os.close(read)
    return os.fdopen(write, "w", buffering=1)


def test_text_after_the_reader_left_is_dropped_and_later_text_and_flushes_raise_nothing():
    stream = _closed_pipe()
    out = Output(stream)
    out.write("line\n" * 3)
    out.writelines(["more\n", "and more\n"])
    out.flush()
    assert out.reader_left
    out.write("x" * 100_000)
    out.flush()
    stream.close()  # the interpreter's last flush at exit finds nothing to complain of


def test_bytes_after_the_reader_left_stop_the_command():
    stream = _closed_pipe()
    out = Output(stream)
    with pytest.raises(ReaderLeft):
        out.buffer.write(b"x" * 100_000)
        out.buffer.flush()
    assert out.reader_left
    stream.close()
