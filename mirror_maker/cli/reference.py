"""The reference tables of docs/configuration.md, made from the option spec and the click commands.

``python -m mirror_maker.cli.reference docs/configuration.md`` rewrites each generated block
(between ``<!-- generated: NAME -->`` and ``<!-- end of generated: NAME -->``) in place;
``tests/unit/test_docs.py`` fails while the file and the spec disagree.
"""

from __future__ import annotations

import re
import sys
from typing import Callable, Dict, Iterable, List

import click

from ..config import spec
from ..config.spec import CLUSTER, FLOW, TOP, Option, format_value

_SCOPES = {TOP: "top", CLUSTER: "`<cluster>.`", FLOW: "`<source>-><target>.`"}
_GROUP_TITLES = {spec.KAFKA: "Kafka's MirrorMaker v1 options (`kafka-mirror-maker.sh`)",
                 spec.OURS: "Extensions", spec.MM2: "MirrorMaker 2's capabilities", spec.SPARK: "Spark mode"}


def _cell(text: str) -> str:
    """A table cell: ``|`` escaped, and ``<`` outside code spans (``<alias>`` is not an HTML tag)."""
    pieces = text.replace("|", "\\|").replace("\n", " ").split("`")
    return "`".join(p.replace("<", "&lt;") if i % 2 == 0 else p for i, p in enumerate(pieces))


def _code(text: str) -> str:
    return f"`{text}`" if text else ""


def _table(header: List[str], rows: Iterable[List[str]]) -> List[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def _sentence(text: str) -> str:
    return text if text.endswith((".", ")")) else text + "."


def _links(text: str) -> str:
    """``docs/x.md`` in a note is a link from docs/configuration.md."""
    return re.sub(r"docs/([\w-]+\.md)", r"[\1](\1)", text)


def _meaning(option: Option) -> str:
    parts = [_sentence(option.doc)]
    if option.notes:
        parts.append(_links(option.notes))
    validator_doc = getattr(option.validator, "doc", None)
    if option.choices:
        parts.append(f"One of {', '.join(option.choices)}.")
    elif validator_doc:
        parts.append(f"Valid: {validator_doc}.")
    return " ".join(parts)


def _default(option: Option) -> str:
    if option.required:
        return "required"
    shown = option.shown_default()
    if shown is None:
        return ""
    return _code(shown) if option.shown is None else shown


def _mm2_key(option: Option) -> str:
    if option.prop is None:
        return ""
    text = _code(option.prop.key)
    if option.prop.default != option.default:
        default = option.prop.default
        text += f" ({_code(format_value(default)) if default is not None else 'none'})"
    return text


def command_line() -> List[str]:
    lines: List[str] = []
    for group in (spec.KAFKA, spec.OURS, spec.MM2, spec.SPARK):
        lines += ["", f"### {_GROUP_TITLES[group]}", ""]
        lines += _table(["Option", "Default", "mm2.properties (its default)", "Meaning"],
                        ([", ".join(_code(f) for f in o.flags), _default(o), _mm2_key(o), _meaning(o)]
                         for o in spec.command_line(group)))
    return lines[1:]


def mm2_properties() -> List[str]:
    def row(option: Option) -> List[str]:
        prop = option.prop
        default = prop.default
        shown = _code(format_value(default)) if default is not None else ""
        if option.required:
            shown = "required"
        owner = "MirrorMaker 2" if prop.mm2 else "ours"
        same = "ours" if not prop.mm2 else (f"differs: {prop.differs}" if prop.differs else "yes")
        choices = prop.choices or (option.choices if prop.type is None else ())
        doc = _links(prop.doc or option.doc)
        if choices:
            doc += f" One of {', '.join(choices)}."
        return [_code(prop.key), ", ".join(_SCOPES[s] for s in prop.scopes), shown, owner,
                ", ".join(_code(f) for f in option.flags[:1]), doc, same]

    return _table(["Key", "Where (the first that gives it wins)", "Default", "Whose", "Command line", "Meaning", "As in Kafka's MirrorMaker 2"],
                  (row(o) for o in spec.OPTIONS if o.prop is not None))


def rules() -> List[str]:
    lines = []
    for rule in spec.RULES:
        if isinstance(rule, spec.Needs):
            lines.append(f"* `--{rule.option}` means something only with `--{rule.switch} true`: given without it, "
                         "one WARN, and it is ignored.")
        elif isinstance(rule, spec.Implies):
            lines.append(f"* `{rule.feature}` needs `{rule.needed}`. On the command line `--{rule.feature} true` "
                         f"turns `--{rule.needed}` on (one error line, exit 1, if that is given as false); in "
                         f"mm2.properties the flow's `{rule.feature}` is off where `{rule.needed}` is false (a WARN "
                         "if it was set), as MirrorMaker 2's connector would not run.")
        elif isinstance(rule, spec.OnlyWith):
            lines.append(f"* `--{rule.option}` is only used with `--{rule.switch}`: one error line, exit 1.")
        else:
            lines.append(f"* `{rule.option}` with `{rule.other}` is not supported ({rule.reason}): one error "
                         "line, exit 1.")
    return lines


def unsupported() -> List[str]:
    return _table(["mm2.properties key", "Why not"], ([_code(k), v] for k, v in spec.UNSUPPORTED.items()))


def _options_table(params) -> List[str]:
    """A click command's options as Option, Default, Meaning."""
    def row(param: click.Option) -> List[str]:
        if param.required:
            default = "required"
        elif isinstance(param.default, (str, int)):
            default = _code(str(param.default))
        else:
            default = ""
        return [", ".join(_code(o) for o in param.opts), default, param.help or ""]

    return _table(["Option", "Default", "Meaning"], (row(p) for p in params if isinstance(p, click.Option)))


def translate_offsets() -> List[str]:
    from .translate_offsets import command

    return _options_table(command.params)


def verify() -> List[str]:
    """Only verify's own options: the rest are the mirror's command line (the table above)."""
    from .verify import OWN_OPTIONS, command

    return _options_table(p for p in command.params if p.name in OWN_OPTIONS)


def cutover() -> List[str]:
    """Only cutover's own options, as verify's."""
    from .cutover import OWN_OPTIONS, command

    return _options_table(p for p in command.params if p.name in OWN_OPTIONS)


BLOCKS: Dict[str, Callable[[], List[str]]] = {
    "command-line": command_line, "mm2-properties": mm2_properties, "rules": rules, "unsupported": unsupported,
    "translate-offsets": translate_offsets, "verify": verify,
    "cutover": cutover,
}


def render(text: str) -> str:
    """``text`` with every generated block made again from the spec."""
    def block(match: re.Match) -> str:
        name = match.group(1)
        if name not in BLOCKS:
            raise KeyError(f"no generated block named {name}")
        return "\n".join([match.group(0).split("\n", 1)[0], *BLOCKS[name](), f"<!-- end of generated: {name} -->"])

    return re.sub(r"<!-- generated: ([\w-]+) -->\n.*?<!-- end of generated: \1 -->", block, text, flags=re.S)


def main(argv: List[str]) -> int:
    for path in argv:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        with open(path, "w", encoding="utf-8") as f:
            f.write(render(text))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
