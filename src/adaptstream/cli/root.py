"""The root of the command line: the typer app, --version and --debug, add-on commands, and the error contract
(one ``error:`` line and an exit code, never a traceback unless asked)."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Sequence
from typing import Annotated

import typer
from rich.markup import escape

from adaptstream.console import err_console
from adaptstream.errors import AdaptstreamError, ConfigError, EnvironmentProblem

DEBUG_ENV = "ADAPTSTREAM_DEBUG"
app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    help="Self-tuning micro-batch stream processing on Apache Spark.",
)


def debug_enabled() -> bool:
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no")


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        from adaptstream import __version__

        try:
            installed = version("adaptstream")
        except PackageNotFoundError:
            installed = __version__
        typer.echo(f"adaptstream {installed}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", is_eager=True, callback=_version, help="Show the version and exit.")
    ] = False,
    debug: Annotated[bool, typer.Option("--debug", help=f"Show full tracebacks (or set {DEBUG_ENV}=1).")] = False,
) -> None:
    """Self-tuning micro-batch stream processing on Apache Spark."""
    if debug:
        os.environ[DEBUG_ENV] = "1"


def register_subapps() -> None:
    """The policy families' own typer apps; `place` is also a top-level command, as the issue names it."""
    from adaptstream.costmodel import cli as costmodel_cli
    from adaptstream.partitioning import cli as partitioning_cli

    app.add_typer(partitioning_cli.app, name="partitioning", help="Skew-aware partitioners (Prompt, holistic).")
    groups = {"partitioning": partitioning_cli.app, "costmodel": costmodel_cli.app}
    if not _load_plugins(groups):
        app.command(
            "bench",
            help=f"Benchmarks (not installed: {HARNESS_HINT}).",
            context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
        )(_no_harness)
    app.add_typer(costmodel_cli.app, name="costmodel", help="Costream cost model and operator placement.")
    app.command("place", help="Choose an operator placement with the Costream cost model.")(costmodel_cli.place)


HARNESS_HINT = "pip install -e benchmarks from a checkout of adaptstream, or scripts/setup.sh --dev"
PLUGINS = "adaptstream.commands"


def _load_plugins(groups: dict) -> bool:
    """Commands of installed add-ons (the benchmark harness): each entry point of group ``adaptstream.commands``
    is called with the root app and the command groups. True when one was loaded."""
    from importlib.metadata import entry_points

    loaded = False
    for ep in entry_points(group=PLUGINS):
        try:
            ep.load()(app, groups)
        except Exception as e:  # a broken add-on must not take the core commands down with it
            err_console.print(
                f"warning: add-on commands {ep.name!r} not loaded: {type(e).__name__}: {e}",
                markup=False,
                soft_wrap=True,
            )
            continue
        loaded = True
    return loaded


def _no_harness() -> None:
    """The benchmarks are a separate package: say how to install it."""
    raise EnvironmentProblem(f"the benchmark harness is not installed: {HARNESS_HINT}")


def _fail(message: str, code: int, hint: bool = True) -> None:
    if debug_enabled():
        traceback.print_exc()
    err_console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True, highlight=False, markup=True)
    if hint and not debug_enabled():
        err_console.print(f"(run with --debug or {DEBUG_ENV}=1 for the full traceback)", style="dim")
    sys.exit(code)


def main(argv: Sequence[str] | None = None, prog_name: str = "adaptstream") -> None:
    """Entry point: typer in standalone mode handles usage errors (exit 2), --help and Exit codes itself;
    our own errors become one line (exit 2 for bad options, 1 otherwise), anything else one line too."""
    saved_debug = os.environ.get(DEBUG_ENV)  # --debug sets it for this invocation only (main may be called again)
    try:
        _main(argv, prog_name)
    finally:
        if saved_debug is None:
            os.environ.pop(DEBUG_ENV, None)
        else:
            os.environ[DEBUG_ENV] = saved_debug


def _main(argv: Sequence[str] | None, prog_name: str) -> None:
    try:
        app(args=list(argv) if argv is not None else None, prog_name=prog_name, standalone_mode=True)
    except ConfigError as exc:
        _fail(str(exc), 2, hint=False)
    except AdaptstreamError as exc:
        _fail(str(exc), 1)
    except KeyboardInterrupt:
        err_console.print("interrupted", style="yellow")
        sys.exit(130)
    except ModuleNotFoundError as exc:  # an optional dependency (the cost model's torch, lightgbm)
        _fail(
            f"this command needs the Python package {exc.name!r}, which is not installed "
            "(`scripts/setup.sh --dev` installs the optional ones)",
            1,
        )
    except Exception as exc:  # a bug or an environment problem we did not foresee: still one line by default
        _fail(f"{type(exc).__name__}: {exc}", 1)
