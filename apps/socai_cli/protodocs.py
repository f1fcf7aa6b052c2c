"""The API reference, from the protos' own comments (part of ``socai docs api``).

One page per proto file (``reference-<area>.md``): its services with each RPC's request,
response and comment, then every message with its fields (number, type, comment) and every
enum with its values. The comments are the reference's only text, so each service, RPC,
message, field, enum and enum value must have one: ``missing`` names those that do not, and
``socai docs api`` (with ``tests/unit/test_reason_codes.py``) fails on any.

The comments come from the source: protoc (``grpc_tools``, a dev dependency, as for
``make proto``) parses proto/ with ``--include_source_info``; the generated modules carry
no comments.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import descriptor_pb2

ROOT = Path(__file__).resolve().parents[2]
PROTO_DIR = ROOT / "proto"
PREFIX = "socai/"  # our files; google/protobuf's well-known types are linked to, not described

FieldType = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    value: name.removeprefix("TYPE_").lower()
    for name, value in FieldType.Type.items()
    if name not in ("TYPE_MESSAGE", "TYPE_ENUM", "TYPE_GROUP")
}
_WELL_KNOWN = "https://protobuf.dev/reference/protobuf/google.protobuf/#"


def descriptor_set(proto_dir: Path = PROTO_DIR) -> descriptor_pb2.FileDescriptorSet:
    """The protos under ``proto_dir`` parsed with their comments (``SourceCodeInfo``)."""
    from grpc_tools import protoc  # dev dependency; imported only here

    protos = sorted(str(p.relative_to(proto_dir)) for p in proto_dir.rglob("*.proto"))
    include = Path(protoc.__file__).parent / "_proto"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "protos.binpb"
        args = ["protoc", f"-I{proto_dir}", f"-I{include}", "--include_source_info", f"--descriptor_set_out={out}"]
        if protoc.main([*args, *protos]) != 0:
            raise SystemExit("protoc failed")
        fds = descriptor_pb2.FileDescriptorSet()
        fds.ParseFromString(out.read_bytes())
    return fds


@dataclass(frozen=True)
class Element:
    """One described element of a proto file: what it is, its full name and its comment."""

    kind: str  # service, rpc, message, field, enum, value
    name: str
    comment: str
    path: tuple[int, ...]


def _comments(f: descriptor_pb2.FileDescriptorProto) -> dict[tuple[int, ...], str]:
    out = {}
    for loc in f.source_code_info.location:
        text = (loc.leading_comments or loc.trailing_comments).strip()
        if text:
            out[tuple(loc.path)] = " ".join(line.strip() for line in text.splitlines())
    return out


def elements(f: descriptor_pb2.FileDescriptorProto) -> Iterator[Element]:
    """Every service, RPC, message (map entries aside), field, enum and enum value of ``f``."""
    said = _comments(f)

    def element(kind: str, name: str, path: tuple[int, ...]) -> Element:
        return Element(kind, name, said.get(path, ""), path)

    for si, service in enumerate(f.service):
        yield element("service", service.name, (6, si))
        for mi, method in enumerate(service.method):
            yield element("rpc", f"{service.name}.{method.name}", (6, si, 2, mi))

    def enums(path: tuple[int, ...], found: list[descriptor_pb2.EnumDescriptorProto], prefix: str) -> Iterator[Element]:
        for i, enum in enumerate(found):
            yield element("enum", prefix + enum.name, (*path, i))
            for vi, value in enumerate(enum.value):
                yield element("value", f"{prefix}{enum.name}.{value.name}", (*path, i, 2, vi))

    def messages(path: tuple[int, ...], found: list[descriptor_pb2.DescriptorProto], prefix: str) -> Iterator[Element]:
        for i, message in enumerate(found):
            here = (*path, i)
            if message.options.map_entry:
                continue
            yield element("message", prefix + message.name, here)
            for fi, field in enumerate(message.field):
                yield element("field", f"{prefix}{message.name}.{field.name}", (*here, 2, fi))
            yield from messages((*here, 3), list(message.nested_type), f"{prefix}{message.name}.")
            yield from enums((*here, 4), list(message.enum_type), f"{prefix}{message.name}.")

    yield from messages((4,), list(f.message_type), "")
    yield from enums((5,), list(f.enum_type), "")


def ours(fds: descriptor_pb2.FileDescriptorSet) -> list[descriptor_pb2.FileDescriptorProto]:
    return [f for f in fds.file if f.name.startswith(PREFIX)]


def missing(fds: descriptor_pb2.FileDescriptorSet) -> list[str]:
    """Every element of our protos without a comment, as ``file: kind name``."""
    return [f"{f.name}: {e.kind} {e.name}" for f in ours(fds) for e in elements(f) if not e.comment]


def page_name(f: descriptor_pb2.FileDescriptorProto) -> str:
    """``socai/table/v1/table.proto`` -> ``reference-table.md``."""
    return f"reference-{f.name.split('/')[1]}.md"


class _Linker:
    """Markdown links to the page and anchor of each message and enum type."""

    def __init__(self, files: list[descriptor_pb2.FileDescriptorProto]) -> None:
        self.pages: dict[str, str] = {}
        for f in files:
            for e in elements(f):
                if e.kind in ("message", "enum"):
                    self.pages[f".{f.package}.{e.name}"] = page_name(f)

    def type_of(self, field: descriptor_pb2.FieldDescriptorProto, here: str, maps: dict[str, tuple[str, str]]) -> str:
        if field.type_name in maps:
            key, value = maps[field.type_name]
            return f"map&lt;{key}, {value}&gt;"
        name = self.link(field.type_name, here) if field.type_name else f"`{_SCALARS[field.type]}`"
        return f"repeated {name}" if field.label == FieldType.LABEL_REPEATED else name

    def link(self, type_name: str, here: str) -> str:
        short = type_name.rsplit(".", 1)[-1]
        page = self.pages.get(type_name)
        if page is None:  # a well-known type: google.protobuf.Timestamp
            return f"[`{type_name.lstrip('.')}`]({_WELL_KNOWN}{short.lower()})"
        anchor = anchor_of(type_name.lstrip("."))
        return f"[`{short}`](#{anchor})" if page == here else f"[`{short}`]({page}#{anchor})"


def anchor_of(full_name: str) -> str:
    return full_name.lower().replace(".", "-")


def reference_page(f: descriptor_pb2.FileDescriptorProto, linker: _Linker) -> str:
    here = page_name(f)
    said = _comments(f)
    lines = [
        f"# Reference: `{f.name}`",
        "",
        f"Generated by `socai docs api` from the comments of `proto/{f.name}` (do not edit: write",
        "the comment in the proto). Package `" + f.package + "`.",
        "",
    ]
    header = said.get((12,), "")  # the comment on ``syntax``: the file's own description
    if header:
        lines += [header, ""]
    for si, service in enumerate(f.service):
        lines += [f"## Service `{service.name}`", "", said.get((6, si), ""), ""]
        lines += ["| RPC | request → response | what it does |", "|---|---|---|"]
        for mi, m in enumerate(service.method):
            request = ("stream " if m.client_streaming else "") + linker.link(m.input_type, here)
            response = ("stream " if m.server_streaming else "") + linker.link(m.output_type, here)
            lines.append(f"| `{m.name}` | {request} → {response} | {_cell(said.get((6, si, 2, mi), ''))} |")
        lines.append("")
    body = [e for e in elements(f) if e.kind in ("message", "enum")]
    if body:
        lines += ["## Messages and enums", ""]
    for e in body:
        full = f"{f.package}.{e.name}"
        lines += [f"### `{e.name}` {{#{anchor_of(full)}}}", "", e.comment, ""]
        if e.kind == "message":
            message = _message_at(f, e.path)
            maps = {
                f".{full}.{nested.name}": (
                    linker.type_of(nested.field[0], here, {}),
                    linker.type_of(nested.field[1], here, {}),
                )
                for nested in message.nested_type
                if nested.options.map_entry
            }
            if message.field:
                lines += ["| field | # | type | meaning |", "|---|---|---|---|"]
                for fi, field in enumerate(message.field):
                    oneof = ""
                    if field.HasField("oneof_index") and not field.proto3_optional:
                        oneof = f" (one of `{message.oneof_decl[field.oneof_index].name}`)"
                    kind = linker.type_of(field, here, maps)
                    meaning = _cell(said.get((*e.path, 2, fi), ""))
                    lines.append(f"| `{field.name}` | {field.number} | {kind}{oneof} | {meaning} |")
                lines.append("")
        else:
            enum = _enum_at(f, e.path)
            lines += ["| value | # | meaning |", "|---|---|---|"]
            for vi, value in enumerate(enum.value):
                lines.append(f"| `{value.name}` | {value.number} | {_cell(said.get((*e.path, 2, vi), ''))} |")
            lines.append("")
    return "\n".join(_squeeze(lines)).rstrip() + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _squeeze(lines: list[str]) -> list[str]:
    """No two blank lines in a row (an element's empty comment)."""
    out: list[str] = []
    for line in lines:
        if line == "" and out and out[-1] == "":
            continue
        out.append(line)
    return out


def _message_at(f: descriptor_pb2.FileDescriptorProto, path: tuple[int, ...]) -> descriptor_pb2.DescriptorProto:
    found: descriptor_pb2.DescriptorProto = f.message_type[path[1]]
    for i in range(2, len(path), 2):
        found = found.nested_type[path[i + 1]]
    return found


def _enum_at(f: descriptor_pb2.FileDescriptorProto, path: tuple[int, ...]) -> descriptor_pb2.EnumDescriptorProto:
    if path[0] == 5:
        return f.enum_type[path[1]]
    return _message_at(f, path[:-2]).enum_type[path[-1]]


def reference_pages(fds: descriptor_pb2.FileDescriptorSet | None = None) -> dict[str, str]:
    """Every reference page: file name -> text."""
    files = ours(fds or descriptor_set())
    linker = _Linker(files)
    return {page_name(f): reference_page(f, linker) for f in files}
