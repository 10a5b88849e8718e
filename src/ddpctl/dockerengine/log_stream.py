"""A container's whole log read in large blocks: docker-py's stream reads each frame of the Engine's multiplexed
format (one per line the job printed) with two small socket reads, about 0.1 ms a line, so a job that printed
millions of lines took minutes to read back. Here the response is read 1 MiB at a time and the frames are cut
out of each block: time linear in the log's size, memory bounded by the block size plus one frame."""

from __future__ import annotations

from typing import Any, Iterator

BLOCK = 1 << 20
HEADER = 8  # the multiplexed format: stream (1 byte), 3 zero bytes, the payload's size (4 bytes, big-endian)


def demultiplex(blocks: Iterator[bytes]) -> Iterator[bytes]:
    """The payloads of the frames in ``blocks`` (stdout and stderr alike), joined per block."""
    buf = b""
    for block in blocks:
        buf = buf + block if buf else block
        out, pos, end = [], 0, len(buf)
        while end - pos >= HEADER:
            size = int.from_bytes(buf[pos + 4:pos + 8], "big")
            if end - pos - HEADER < size:
                break
            out.append(buf[pos + HEADER:pos + HEADER + size])
            pos += HEADER + size
        buf = buf[pos:]
        if out:
            yield b"".join(out)
    if buf[HEADER:]:
        yield buf[HEADER:]  # a frame cut short by the Engine: what came of it


def read_logs(api: Any, cid: str, params: dict) -> Iterator[bytes]:
    """``GET /containers/{id}/logs`` (not followed) over docker-py's ``APIClient`` ``api``, in blocks."""
    tty = bool(((api.inspect_container(cid) or {}).get("Config") or {}).get("Tty"))
    res = api._get(api._url("/containers/{0}/logs", cid), params={**params, "follow": False}, stream=True)
    try:
        api._raise_for_status(res)
        blocks = iter(lambda: res.raw.read(BLOCK), b"")  # HTTP chunks (a frame each) read across, 1 MiB at a time
        yield from (blocks if tty else demultiplex(blocks))
    finally:
        res.close()
