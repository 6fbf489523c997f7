"""A webhook receiver that answers 200 with a body that never ends.

For server/README.md's notify numbers (issue 24, N2): point
`--notify-url http://127.0.0.1:PORT/hook` at it and watch the server's
RSS while notifications go out. Prints every 5 s how many posts it
answered and how many bytes the kernel took from it (socket buffers
included, so more than the server read).

    python3 bench/endless-receiver.py PORT
"""

import socket
import sys
import threading
import time

CHUNK = b"%x\r\n%s\r\n" % (65536, b"x" * 65536)
counts = {"posts": 0, "bytes": 0}


def answer(conn: socket.socket) -> None:
    try:
        conn.recv(65536)
        counts["posts"] += 1
        conn.sendall(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        while True:
            conn.sendall(CHUNK)
            counts["bytes"] += len(CHUNK)
    except OSError:
        pass
    finally:
        conn.close()


def report() -> None:
    while True:
        time.sleep(5)
        print(
            f"receiver: {counts['posts']} posts answered, "
            f"{counts['bytes'] >> 10} KiB taken by the kernel",
            flush=True,
        )


def main() -> None:
    port = int(sys.argv[1])
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    threading.Thread(target=report, daemon=True).start()
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=answer, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
