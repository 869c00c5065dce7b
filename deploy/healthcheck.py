"""The container's health check: exit 0 when the server's `/readyz` answers 200, else 1.

It asks 127.0.0.1 on TETHER_PORT (default 8000): the server listens on every address in the
image (TETHER_HOST=0.0.0.0), and a probe from inside needs no token. Standard library only, so
the image needs no curl.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request

TIMEOUT_S = 4.0  # under the image's HEALTHCHECK --timeout (5 s)


def main() -> int:
    url = f"http://127.0.0.1:{int(os.environ.get('TETHER_PORT', '8000'))}/readyz"
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
            status = response.status
    except urllib.error.HTTPError as exc:  # 503 while starting or when a check fails
        status = exc.code
    except OSError as exc:  # refused, timed out: not serving (yet)
        print(f"{url}: {exc}", file=sys.stderr)
        return 1
    if status != 200:
        print(f"{url}: HTTP {status}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
