"""Git over HTTP for the fake GitLab: the smart HTTP protocol served by ``git http-backend``
(the CGI program that ships with git, https://git-scm.com/docs/git-http-backend) in front of
the real repositories a test builds, with GitLab's authentication in front of it.

GitLab (lib/gitlab/auth.rb ``find_for_git_client``) takes HTTP basic auth on
``/<namespace>/<project>.git/info/refs`` and ``/git-upload-pack``: any user name with an access
token as the password (``oauth2`` for OAuth tokens), a token with the ``api`` or
``read_repository`` scope. Without valid credentials it answers 401 with ``WWW-Authenticate:
Basic realm="GitLab"`` and the "HTTP Basic: Access denied" text git prints after ``remote:``.
Gitaly lets a client fetch any commit by SHA (``uploadpack.allowAnySHA1InWant``), as GitLab does.

Like the rest of the fake, this does not import reviewbot.
"""

from __future__ import annotations

import base64
import gzip
import os
import re
import shutil
import subprocess
from http import HTTPStatus
from pathlib import Path
from typing import BinaryIO

# git, found once: a test may take git off the PATH of the code under test, not off the fake's.
GIT = shutil.which("git") or "git"
GIT_PATH = re.compile(r"\A/(?P<project>.+?)\.git(?P<rest>/info/refs|/git-upload-pack)\Z")
GIT_SCOPES = frozenset({"api", "read_repository"})
BACKEND_TIMEOUT_S = 60
ACCESS_DENIED = (
    "HTTP Basic: Access denied. If a password was provided for Git authentication, the "
    "password was incorrect or you're required to use a token instead of a password. If a "
    "token was provided, it was either incorrect, expired, or improperly scoped. See "
    "{url}/help/topics/git/troubleshooting_git.md#error-on-git-fetch-http-basic-access-denied\n"
)
PROJECT_NOT_FOUND_TEXT = (
    "The project you were looking for could not be found or you don't have permission to view it.\n"
)


def basic_auth_password(authorization: str) -> str | None:
    """The password of an ``Authorization: Basic`` header (None: no such header)."""
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        pair = base64.b64decode(value.strip(), validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        return None
    user, separator, password = pair.partition(":")
    return password if separator and user else None


def asks_for_objects(body: bytes, headers: dict[str, str]) -> bool:
    """Whether an upload-pack request is a fetch (v2 ``command=fetch``, v0 ``want``), not a
    v2 ``ls-refs``."""
    if headers.get("content-encoding") == "gzip":
        body = gzip.decompress(body)
    return b"command=fetch" in body or body[4:9] == b"want "


def http_backend(
    repo: Path, method: str, rest: str, query: str, headers: dict[str, str], body: bytes
) -> tuple[int, dict[str, str], bytes]:
    """Run ``git http-backend`` for one request on the repository ``repo`` (a work tree)."""
    env = {
        "PATH": os.pathsep.join([os.path.dirname(GIT), os.environ.get("PATH", "")]),
        "HOME": os.environ.get("HOME", "/"),
        "GIT_PROJECT_ROOT": str(repo),
        "GIT_HTTP_EXPORT_ALL": "1",
        "PATH_INFO": f"/.git{rest}",
        "REQUEST_METHOD": method,
        "QUERY_STRING": query,
        "REMOTE_ADDR": "127.0.0.1",
        "CONTENT_TYPE": headers.get("content-type", ""),
        "CONTENT_LENGTH": str(len(body)),
        "GIT_CONFIG_COUNT": "2",
        "GIT_CONFIG_KEY_0": "uploadpack.allowAnySHA1InWant",
        "GIT_CONFIG_VALUE_0": "true",
        "GIT_CONFIG_KEY_1": "uploadpack.allowFilter",
        "GIT_CONFIG_VALUE_1": "true",
    }
    if "git-protocol" in headers:
        env["GIT_PROTOCOL"] = headers["git-protocol"]
    if "content-encoding" in headers:
        env["HTTP_CONTENT_ENCODING"] = headers["content-encoding"]
    done = subprocess.run(
        [GIT, "http-backend"],
        input=body,
        capture_output=True,
        env=env,
        timeout=BACKEND_TIMEOUT_S,
        check=False,
    )
    return _cgi_answer(done.stdout)


def _cgi_answer(output: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, payload = output.partition(b"\r\n\r\n")
    if not payload and b"\n\n" in output:
        head, _, payload = output.partition(b"\n\n")
    status = int(HTTPStatus.OK)
    headers: dict[str, str] = {}
    for line in head.decode("latin-1").splitlines():
        name, _, value = line.partition(":")
        if name.lower() == "status":
            status = int(value.split()[0])
        elif name:
            headers[name.strip()] = value.strip()
    return status, headers, payload


def read_chunked(stream: BinaryIO) -> bytes:
    """A request body sent with ``Transfer-Encoding: chunked`` (git does past 1 MiB)."""
    read_line, read = stream.readline, stream.read
    body = b""
    while True:
        size = int(read_line().split(b";")[0].strip() or b"0", 16)
        if size == 0:
            read_line()
            return body
        body += read(size)
        read_line()
