"""The API reference is made of the protos' comments (``socai_cli.protodocs``): every
service, RPC, message, field, enum and enum value has one, an element without one is named,
and the pages link each type to where it is described."""

from __future__ import annotations

from pathlib import Path

from socai_cli import protodocs

TINY = """// A tiny service for the test.
syntax = "proto3";

package tiny.v1;

import "google/protobuf/timestamp.proto";

// Says hello.
service Hello {
  // Greets.
  rpc Greet(GreetRequest) returns (stream GreetResponse);
  rpc Wave(GreetRequest) returns (GreetResponse);
}

// Who to greet.
message GreetRequest {
  // Their name.
  string name = 1;
  map<string, int64> counts = 2;
  google.protobuf.Timestamp at = 3;
  // How.
  Mood mood = 4;
}

// The greeting.
message GreetResponse {
  // The words.
  repeated string words = 1;
}

// A mood.
enum Mood {
  // Unset.
  MOOD_UNSPECIFIED = 0;
  MOOD_HAPPY = 1;
}
"""


def tiny(tmp_path: Path) -> Path:
    (tmp_path / "tiny" / "v1").mkdir(parents=True)
    (tmp_path / "tiny" / "v1" / "tiny.proto").write_text(TINY)
    return tmp_path


def test_every_element_of_the_protos_has_a_comment() -> None:
    undescribed = protodocs.missing(protodocs.descriptor_set())
    assert undescribed == [], f"write a comment in the proto for: {undescribed[:20]} ({len(undescribed)})"


def test_an_element_without_a_comment_is_named(tmp_path: Path) -> None:
    fds = protodocs.descriptor_set(tiny(tmp_path))
    files = [f for f in fds.file if f.name.startswith("tiny/")]
    named = [f"{e.kind} {e.name}" for f in files for e in protodocs.elements(f) if not e.comment]
    assert named == ["rpc Hello.Wave", "field GreetRequest.counts", "field GreetRequest.at", "value Mood.MOOD_HAPPY"]


def test_a_page_links_each_type_and_shows_maps_streams_and_well_known_types(tmp_path: Path) -> None:
    fds = protodocs.descriptor_set(tiny(tmp_path))
    files = [f for f in fds.file if f.name.startswith("tiny/")]
    page = protodocs.reference_page(files[0], protodocs._Linker(files))
    assert "| `Greet` | [`GreetRequest`](#tiny-v1-greetrequest) → stream [`GreetResponse`]" in page
    assert "| `counts` | 2 | map&lt;`string`, `int64`&gt; |" in page
    assert "[`google.protobuf.Timestamp`](https://protobuf.dev/" in page
    assert "| `mood` | 4 | [`Mood`](#tiny-v1-mood) | How. |" in page
    assert "### `GreetRequest` {#tiny-v1-greetrequest}" in page
    assert "A tiny service for the test." in page
