"""A command line builds only its own command module (cold start); the table that maps a top-level command to its
module must say exactly what registering every module gives, or a command would vanish from its own line."""

from __future__ import annotations

import importlib

import typer

from rackmath.cli import main as cli_main


def _registered(module: str) -> set[str]:
    app = typer.Typer()
    importlib.import_module(f"rackmath.cli.{module}").register(app)
    return {c.name or c.callback.__name__ for c in app.registered_commands} | {g.name for g in app.registered_groups}


def test_command_table_matches_what_each_module_registers():
    table: dict[str, set[str]] = {}
    for name, module in cli_main.COMMAND_MODULE.items():
        table.setdefault(module, set()).add(name)
    assert set(table) == set(cli_main.MODULES)
    for module in cli_main.MODULES:
        assert table[module] == _registered(module), module


def test_a_command_line_builds_its_module_only():
    assert cli_main._modules_for(["serve", "llama-3.3-70b"]) == ("serve",)
    assert cli_main._modules_for(["--catalog", "serve", "racks", "pipeline"]) == ("layout",)  # DIR named "serve"
    assert cli_main._modules_for(["--wide", "--columns", "a,b", "sweep", "x"]) == ("roofline",)
    assert cli_main._modules_for(["--catalog=serve", "overtrain"]) == ("train",)
    assert cli_main._modules_for(["--help"]) == cli_main.MODULES
    assert cli_main._modules_for(["srve"]) == cli_main.MODULES  # a typo: click refuses it among every command
    assert set(cli_main.command(["serve"]).commands) == {"serve"}
    assert len(cli_main.command().commands) == len(cli_main.COMMAND_MODULE)


def test_typo_and_help_still_see_every_command():
    from conftest import run_cli

    code, _, err = run_cli("srve", "llama-3.3-70b")
    assert code == 2 and err.startswith("error: command: No such command")
    code, out, _ = run_cli("--help")
    assert code == 0
    for name in ("serve", "racks", "overtrain", "web", "cache"):
        assert name in out
    code, out, _ = run_cli("serve", "--help")
    assert code == 0 and "--isl" in out
