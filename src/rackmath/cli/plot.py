"""`rackmath plot …`: one group; other command modules add their figures to ``plot_app``.

    from .plot import plot_app

    @plot_app.command("pareto")
    def pareto(...): ...
"""

from __future__ import annotations

import typer

plot_app = typer.Typer(help="Write blackboard figures (PNG or SVG).", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(plot_app, name="plot")
