"""The click options of ``kafka-mirror-maker`` and its ``--help`` table, made from ``config.spec``.

Kafka's dotted names are kept verbatim; each gets an explicit Python name (the field it feeds)
because click cannot derive one from a dotted flag. Every option defaults to None here (a flag to
False, a repeatable option to ()), so that what was given can be told from what was not; the
spec's defaults are the config objects' own.
"""

from __future__ import annotations

import textwrap
from typing import Dict, Iterable, List, Tuple

import click

from ..config import spec
from ..config.spec import BOOLEAN, FLAG, INT, Option

HEADLINE = "This tool helps to continuously copy data between two Kafka clusters."


def _boolean(ctx, param, value):
    if value is None:
        return None
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise click.BadParameter(f"'{value}' is not true or false", param_hint=param.opts[0])
    return text == "true"


def click_option(option: Option, **overrides):
    """The click decorator of one option of the spec."""
    kwargs = {"help": option.doc}
    if option.type == FLAG:
        kwargs["is_flag"] = True
    elif option.type == INT:
        kwargs["type"] = int
    elif option.type == BOOLEAN:
        kwargs["callback"] = _boolean
    if option.repeatable:
        kwargs["multiple"] = True
    kwargs.update(overrides)
    return click.option(*option.flags, option.attr, **kwargs)


def apply(command):
    """Decorate ``command`` with every option of the command line, in the spec's order."""
    for option in reversed(list(spec.command_line())):
        command = click_option(option)(command)
    return command


def is_given(option: Option, value) -> bool:
    if option.type == FLAG:
        return bool(value)
    return value is not None and not (option.repeatable and not value)


def given(params: Dict[str, object]) -> Dict[str, object]:
    """Option name -> value, for the options of the command line that were given."""
    return {o.name: params[o.attr] for o in spec.command_line() if o.attr in params and is_given(o, params[o.attr])}


def value_flags() -> List[Tuple[str, ...]]:
    """Each option that takes a value once, as its flags (a repeated one is an error, as in jopt-simple)."""
    return [o.flags for o in spec.command_line() if o.type != FLAG and not o.repeatable]


def _table(rows: Iterable[Tuple[str, str]], width: int = 80, left: int = 40) -> List[str]:
    lines = []
    for name, description in rows:
        left_lines = textwrap.wrap(name, left - 2, subsequent_indent="  ") or [""]
        right_lines = textwrap.wrap(description, width - left) or [""]
        for i in range(max(len(left_lines), len(right_lines))):
            l_text = left_lines[i] if i < len(left_lines) else ""
            r_text = right_lines[i] if i < len(right_lines) else ""
            lines.append(f"{l_text:<{left}}{r_text}".rstrip())
    return lines


def _rows(options: Iterable[Option]) -> List[Tuple[str, str]]:
    rows = []
    for option in sorted(options, key=lambda o: o.flags[0]):
        text, default = option.doc, option.shown_default()
        if default is not None:
            text = f"{text} (default: {default})"
        meta = f" <{option.metavar}>" if option.metavar else ""
        rows.append((", ".join(option.flags) + meta, text))
    return rows


def usage_text() -> str:
    """Kafka's jopt-simple table (sorted, with defaults), then a section per group of ours."""
    lines = [HEADLINE, *_table([("Option", "Description"), ("------", "-----------")])]
    lines += _table(_rows(spec.command_line(spec.KAFKA)))
    for group, heading in spec.HEADINGS.items():
        lines += ["", heading, *_table(_rows(spec.command_line(group)))]
    lines += ["", "Where a consumer group resumes on the target, from the checkpoints: "
              "kafka-mirror-maker translate-offsets --help",
              "Whether the target holds every record of the source (before a cutover): "
              "kafka-mirror-maker verify --help",
              "A planned move (drain, verify, every group placed on the target): kafka-mirror-maker cutover --help"]
    return "\n".join(lines)
