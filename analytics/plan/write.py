"""A plan on disk: its files as multi-document YAML (through PyYAML's safe dumper, never text
formatting) and its README, into a folder or one zip."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from analytics.plan.result import Plan


def dump_yaml(objs: list[dict[str, Any]]) -> str:
    """Multi-document YAML of ``objs``; a multi-line string (an embedded config) as a ``|`` block
    (PyYAML falls back to a quoted scalar where a block cannot hold the text)."""
    import yaml

    class _Dumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> Any:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    _Dumper.add_representer(str, text)
    return yaml.dump_all(objs, Dumper=_Dumper, sort_keys=False)


def write_plan(plan: Plan, out_dir: str | Path) -> list[Path]:
    """Write the plan's files (multi-document YAML) and README.md into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, objs in plan.files.items():
        p = out / name
        p.write_text(dump_yaml(objs), encoding="utf-8")
        written.append(p)
    readme = out / "README.md"
    readme.write_text(plan.readme, encoding="utf-8")
    return [*written, readme]


def plan_zip(plan: Plan) -> bytes:
    """The plan's folder as one zip file (the What-if page's download)."""
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, objs in plan.files.items():
            z.writestr(f"tidelens-plan-{plan.policy}/{name}", dump_yaml(objs))
        z.writestr(f"tidelens-plan-{plan.policy}/README.md", plan.readme)
    return buf.getvalue()
