"""Which files are skipped, and the exact reason given (reviewbot.exclusions), on plain data.

The long-line heuristic (issue 32 item 9: a Markdown file changed in an MR was skipped as
"minified"): prose with one paragraph per line, prose without spaces (Japanese), long-line data
and real minified code, each with the reason the summary shows.
"""

from __future__ import annotations

from reviewbot.diff import FileDiff, parse_git_diff
from reviewbot.exclusions import ExclusionRules, skip_reason

RULES = ExclusionRules()

# One paragraph per line, as many editors write Markdown (soft wrap): 600-900 characters a line.
PARAGRAPHS = [
    "reviewbot reads a merge request's diff, cuts it into prompts that fit the model's context, "
    "sends them to a local vLLM server running a Qwen3.5 model with tool calling, posts inline "
    "comments on the exact diff lines plus one summary note, and records every review, model "
    "call and finding in a database. No per-token cost, nothing leaves your network, and every "
    "comment can be traced back to a model call with its latency and token counts. Teams that "
    "own GPUs run an open model behind the server and want every merge request reviewed.",
    "The first command installs reviewbot with everything needed to develop and test it (the "
    "model server itself is an optional extra, never needed by the tests). The second runs the "
    "whole test suite against fake GitLab and fake vLLM servers on the loopback address: no "
    "GPU, no GitLab, no network. Running parts of it, PostgreSQL, lint and benchmarks are "
    "described in the development guide, with the commands to run and what each one checks, "
    "and why a test that needs a real server is skipped when none is configured for it.",
    "In any git repository, with reviewbot on your PATH, first see offline how the last "
    "commit's diff is cut into prompts: chunks, files, tokens, and the coverage report, where "
    "every changed line lands in exactly one chunk and skipped files are listed with their "
    "reason. Then review it with the model, and review a merge request: the dry run shows what "
    "would be posted; without it the comments are posted, and the summary note says what was "
    "reviewed, what was not, and why, so that nobody reads a partial review as a complete one.",
]
# Japanese prose: long lines, no spaces at all.
SENTENCE_JA = "レビューボットはマージリクエストの差分を読み、モデルの文脈に収まるように分割します。"
JAPANESE = [SENTENCE_JA * 15] * 3
# A CSV export: long rows of numbers, commas, no spaces.
CSV_ROWS = [",".join(f"{row}.{col:03d}" for col in range(160)) for row in range(4)]
# A webpack-style minified bundle (dist/app.js: no .min in its name), one line.
MINIFIED_JS = (
    '!function(e,t){"use strict";"object"==typeof module&&"object"==typeof module.exports?'
    "module.exports=e.document?t(e,!0):function(e){if(!e.document)throw new Error("
    '"app requires a window with a document");return t(e)}:t(e)}("undefined"!=typeof window?'
    "window:this,function(C,e){var t=[],r=Object.getPrototypeOf,s=t.slice,g=t.flat?function(e)"
    "{return t.flat.call(e)}:function(e){return t.concat.apply([],e)},u=t.push,i=t.indexOf,n={}"
    ",o=n.toString,v=n.hasOwnProperty,a=v.toString,l=a.call(Object),y={},m=function(e){return"
    '"function"==typeof e&&"number"!=typeof e.nodeType&&"function"!=typeof e.item},x=function'
    "(e){return null!=e&&e===e.window},E=C.document,c={type:!0,src:!0,nonce:!0,noModule:!0};"
) * 4
MINIFIED_CSS = (
    "body{margin:0;font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;color:#222}"
    ".btn{display:inline-block;padding:.375rem .75rem;border:1px solid transparent;"
    "border-radius:.25rem}.btn:hover{color:#fff;background-color:#0b5ed7}.nav>li>a{padding:0}"
) * 6


def added_file(path: str, lines: list[str]) -> FileDiff:
    """A new file ``path`` holding ``lines``, as git diffs it."""
    body = "".join(f"+{line}\n" for line in lines)
    text = (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
        f"@@ -0,0 +1,{len(lines)} @@\n{body}"
    )
    [file] = parse_git_diff(text)
    return file


def test_prose_with_a_paragraph_per_line_is_reviewed() -> None:
    assert min(len(p) for p in PARAGRAPHS) > 500  # longer than the old minified threshold
    for path in ("README.md", "docs/guide.rst", "notes.txt", "site/about.html"):
        assert skip_reason(added_file(path, PARAGRAPHS), RULES) is None, path


def test_prose_without_spaces_in_a_prose_file_is_reviewed() -> None:
    assert skip_reason(added_file("docs/ja/README.md", JAPANESE), RULES) is None


def test_long_line_data_is_skipped_as_data_never_as_minified() -> None:
    reason = skip_reason(added_file("data/points.csv", CSV_ROWS), RULES)
    average = sum(map(len, CSV_ROWS)) // len(CSV_ROWS)
    assert reason == f"long-line data (added lines {average:,} characters long on average)"
    literal = ["WEIGHTS = [" + ",".join(str(n) for n in range(1000)) + "]"]
    assert (skip_reason(added_file("model/weights.py", literal), RULES) or "").startswith(
        "long-line data ("
    )


def test_real_minified_code_is_skipped_as_minified() -> None:
    for path, text in (("dist/app.js", MINIFIED_JS), ("static/site.css", MINIFIED_CSS)):
        reason = skip_reason(added_file(path, [text]), RULES)
        assert reason == f"minified (added lines {len(text):,} characters long on average)", path


def test_short_lines_are_reviewed_whatever_the_file() -> None:
    code = ["def total(items):", "    return sum(item.price for item in items)"]
    for path in ("app.py", "data/small.csv", "README.md"):
        assert skip_reason(added_file(path, code), RULES) is None, path
