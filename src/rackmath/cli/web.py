"""`rackmath web`: serve the interactive blackboard on this machine (loopback by default)."""

from __future__ import annotations

import typer


def web_cmd(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (default loopback only; 0.0.0.0 exposes "
                                                         "it to your network)."),
    port: int = typer.Option(8000, "--port", min=1, max=65535, help="TCP port."),
    open_browser: bool = typer.Option(False, "--open", help="Open the index page in your browser."),
):
    """Serve every lecture chapter as an interactive page, with serve, plan and validate, and a JSON API (/docs)."""
    from ..errors import InputError

    try:
        import uvicorn

        from ..web import create_app
        from ..web.app import LOOPBACK_HOSTS

        loopback = host in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")
        app = create_app(allowed_hosts=(*LOOPBACK_HOSTS, host) if loopback else None)
    except ImportError as e:
        raise InputError("web", f"missing package {e.name!r}", "pip install 'rackmath[web]'") from None
    _check_listen(host, port)
    url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}/"
    typer.echo(f"rackmath web on {url} (Ctrl-C stops it)", err=True)
    if open_browser:
        import threading
        import webbrowser

        threading.Timer(1.0, webbrowser.open, args=(url,)).start()
    uvicorn.run(app, host=host, port=port, log_level="warning")


def _check_listen(host: str, port: int) -> None:
    """Fail with one line (exit 2) before uvicorn would print its own error: unknown host, port in use."""
    import socket

    from ..errors import InputError

    try:
        family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (OSError, UnicodeError) as e:
        raise InputError("--host", f"cannot resolve {host!r} ({getattr(e, 'strerror', None) or e})",
                         "a local address such as 127.0.0.1 (default), ::1 or 0.0.0.0") from None
    with socket.socket(family, kind, proto) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(addr)
        except OSError as e:
            field = "--port" if e.errno in (98, 48, 10048, 13) else "--host"  # in use / permission: the port
            raise InputError(field, f"cannot listen on {host}:{port}: {e.strerror or e}",
                             "a free port (--port) on a local address (--host)") from None


def register(app: typer.Typer) -> None:
    app.command("web")(web_cmd)
