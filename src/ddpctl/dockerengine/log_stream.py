"""A container's whole log read in large blocks: docker-py's stream reads each frame of the Engine's multiplexed
format (one per line the job printed) with two small socket reads, about 0.1 ms a line, so a job that printed
millions of lines took minutes to read back. Here the response is read 1 MiB at a time and the frames are cut
out of each block (about 1 µs a line): time linear in the log's size, memory bounded by the block size plus one frame."""

from __future__ import annotations

from typing import Any, Iterator

BLOCK = 1 << 20
HEADER = 8  # the multiplexed format: stream (1 byte), 3 zero bytes, the payload's size (4 bytes, big-endian)


def demultiplex(blocks: Iterator[bytes]) -> Iterator[bytes]:
    """The payloads of the frames in ``blocks`` (stdout and stderr alike), one by one."""
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
        yield from out  # a frame at a time (a line, mostly): a reader that splits lines gets small pieces
    if buf[HEADER:]:
        yield buf[HEADER:]  # a frame cut short by the Engine: what came of it


def _blocks(res: Any) -> Iterator[bytes]:
    """The response body in large blocks. The Engine sends each frame as an HTTP chunk of its own: http.client
    decodes those at about 5 µs each, so a chunked body is decoded here, off the socket's buffered reader (the
    one http.client read the headers from), in 1 MiB reads; any other body is read through urllib3."""
    fp = getattr(res.raw, "_fp", None)
    sock = getattr(fp, "fp", None)
    if not (getattr(fp, "chunked", False) and getattr(fp, "chunk_left", 0) is None and hasattr(sock, "read1")):
        yield from iter(lambda: res.raw.read(BLOCK), b"")
        return
    yield from dechunk(sock.read1)


def dechunk(read: Any) -> Iterator[bytes]:
    """HTTP/1.1 chunked transfer coding (``size-in-hex[;ext]\\r\\n data \\r\\n`` ..., ``0\\r\\n``) from
    ``read(n)``: the data of the chunks, joined per read. A body cut short yields what came of it."""
    buf, pos = b"", 0
    while True:
        out = []
        while True:
            nl = buf.find(b"\r\n", pos)
            if nl < 0:
                break
            try:
                size = int(buf[pos:nl].split(b";", 1)[0], 16)
            except ValueError:
                raise OSError(f"the Engine's log stream is not chunked HTTP ({bytes(buf[pos:nl][:40])!r})") from None
            if size == 0:
                if out:
                    yield b"".join(out)
                return
            end = nl + 2 + size
            if len(buf) < end + 2:
                break
            out.append(buf[nl + 2:end])
            pos = end + 2
        if out:
            yield b"".join(out)
        more = read(BLOCK)
        if not more:
            rest = buf[pos:]
            nl = rest.find(b"\r\n")
            if nl >= 0 and rest[nl + 2:]:
                yield rest[nl + 2:]
            return
        buf, pos = buf[pos:] + more, 0


def read_logs(api: Any, cid: str, params: dict) -> Iterator[bytes]:
    """``GET /containers/{id}/logs`` (not followed) over docker-py's ``APIClient`` ``api``, in blocks."""
    tty = bool(((api.inspect_container(cid) or {}).get("Config") or {}).get("Tty"))
    res = api._get(api._url("/containers/{0}/logs", cid), params={**params, "follow": False}, stream=True)
    try:
        api._raise_for_status(res)
        yield from (_blocks(res) if tty else demultiplex(_blocks(res)))
    finally:
        res.close()
