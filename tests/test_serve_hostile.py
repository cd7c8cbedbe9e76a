"""The service under hostile use (issue 33): the real server on 127.0.0.1, real files.

Every test here failed before the fix it checks: writes without a token, a foreign Host,
journal records that brick a restart or swallow the next post, a refused batch applied after a
restart, unbounded new tags, chunked bodies buffered whole, half-sent headers held forever,
500s for bad input, and folders that start silently and fail on the first post.
"""

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest
from conftest import AUTH, TOKEN, start_server

from tagtorch.errors import UnreadableFileError
from tagtorch.serving.journal import COMPACTION_FOLDER, finish_compaction
from tagtorch.serving.tags import TagRecommender

PER_REQUEST, IN_TOTAL = 5, 12  # the guarded server's new-tag limits


def copy_of(fitted, tmp_path, name="artifact"):
    folder = tmp_path / name
    shutil.copytree(fitted[3], folder)
    return folder


def stop(process):
    process.terminate()
    try:
        return process.communicate(timeout=30)[0].decode(errors="replace")
    except subprocess.TimeoutExpired:
        process.kill()
        return process.communicate()[0].decode(errors="replace")


def applied(url, timeout=60.0):
    """Waits until the service has applied every acknowledged post; returns /v1/info."""
    deadline = time.monotonic() + timeout
    while True:
        info = httpx.get(f"{url}/v1/info", timeout=10).json()
        if info["pending_posts"] == 0 or time.monotonic() > deadline:
            return info
        time.sleep(0.1)


def recommended(url, tags, k=1000):
    body = httpx.post(f"{url}/v1/tags", json={"tags": tags, "k": k}, timeout=30).json()
    return [entry["tag"] for entry in body["tags"]]


def serve_command(folder, *options, file_size_limit=None):
    """``python -m tagtorch.serve`` on a free port; with ``file_size_limit``, no file the
    server writes may grow past that many bytes (RLIMIT_FSIZE: a full disk). ``(argv, url)``.
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    arguments = [str(folder), "--port", str(port), *options]
    if file_size_limit is None:
        return [sys.executable, "-m", "tagtorch.serve", *arguments], f"http://127.0.0.1:{port}"
    code = (f"import resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, "
            f"({file_size_limit}, {file_size_limit})); from tagtorch.serve import main; "
            f"sys.exit(main(sys.argv[1:]))")
    return [sys.executable, "-c", code, *arguments], f"http://127.0.0.1:{port}"


def refused_start(folder, *options, file_size_limit=None):
    """Starts the service expecting it to refuse: ``(exit code, stderr)``."""
    command, _ = serve_command(folder, *options, file_size_limit=file_size_limit)
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    return done.returncode, done.stderr


@pytest.fixture(scope="module")
def guarded(fitted, tmp_path_factory):
    """A service with short timeouts and small limits, its token in the environment.

    ``(url, process, folder)``; the other service tests give the token by ``--token-file``.
    """
    folder = copy_of(fitted, tmp_path_factory.mktemp("guarded"))
    os.environ["TAGTORCH_SERVE_TOKEN"] = TOKEN
    try:
        process, url = start_server(folder, "--header-timeout", "1", "--body-timeout", "2",
                                    "--max-connections", "30", "--max-new-tags-per-request",
                                    str(PER_REQUEST), "--max-new-tags", str(IN_TOTAL),
                                    token=False)
    finally:
        del os.environ["TAGTORCH_SERVE_TOKEN"]
    yield url, process, folder
    output = stop(process)
    assert "Traceback" not in output, output  # nothing above ever reached a traceback


def post(url, posts, headers=AUTH):
    """POST /v1/posts; the body is ASCII JSON, so that it may carry a lone surrogate."""
    return httpx.post(f"{url}/v1/posts", content=json.dumps({"posts": posts}).encode(),
                      headers={"content-type": "application/json", **headers}, timeout=60)


# ------------------------------------------------------------------------------ writes
def test_writes_need_the_token(guarded, fitted):
    url = guarded[0]
    known = fitted[2].display[0]
    one = [{"user": "u", "object": "auth-test", "tags": [known]}]
    assert post(url, one, headers={}).status_code == 401
    assert post(url, one, headers={"authorization": "Bearer wrong-token-0123456789"}
                ).status_code == 401
    assert post(url, one, headers={"authorization": TOKEN}).status_code == 401
    assert post(url, one).status_code == 200
    assert httpx.get(f"{url}/v1/info", timeout=10).json()["writes"] == "token"  # from the env


def test_a_foreign_host_header_is_refused(guarded):
    url = guarded[0]
    assert httpx.get(f"{url}/health", headers={"host": "evil.example"},
                     timeout=10).status_code == 400
    assert httpx.get(f"{url}/health", headers={"host": "localhost"}, timeout=10
                     ).status_code == 200


@pytest.mark.integration
def test_writes_are_off_by_default_and_absent_when_read_only(fitted, tmp_path):
    folder = copy_of(fitted, tmp_path)
    process, url = start_server(folder, token=False)
    try:
        response = post(url, [{"user": "u", "object": "o", "tags": ["x"]}])
        assert response.status_code == 403 and "--token-file" in response.json()["detail"]
        assert httpx.get(f"{url}/v1/info", timeout=10).json()["writes"] == "off"
    finally:
        stop(process)
    os.chmod(folder, 0o555)  # a read-only folder serves read-only
    try:
        process, url = start_server(folder, "--read-only", token=False)
        try:
            assert post(url, [{"user": "u", "object": "o", "tags": ["x"]}]).status_code == 404
            assert "/v1/posts" not in httpx.get(f"{url}/openapi.json", timeout=10
                                                ).json()["paths"]
            assert recommended(url, [fitted[2].display[0]])
        finally:
            stop(process)
    finally:
        os.chmod(folder, 0o755)


# ------------------------------------------------------------------------------ journal
def test_acknowledged_posts_survive_and_refused_ones_leave_no_trace(fitted, tmp_path):
    """Line separators, a refused batch, a failed (torn) write, then a kill -9 and a restart.

    (The compaction a writing service does at its start: test_a_compaction_cut_short_...)
    """
    folder = copy_of(fitted, tmp_path)
    (folder.parent / "artifact.token").write_text(TOKEN)
    command, url = serve_command(folder, "--token-file", str(folder.parent / "artifact.token"),
                                 file_size_limit=70_000)  # the disk is full past it
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    known = fitted[2].display[0]
    try:
        wait_for(url, process)
        base = applied(url)["d_objects"]
        separators = ["one\u2028a", "two\u2029b", "three\u0085c"]
        assert post(url, [{"user": "u", "object": "sep", "tags": [known, *separators]}]
                    ).status_code == 200
        refused = post(url, [{"user": "u", "object": "first-of-batch", "tags": [known]},
                             {"user": "u", "object": "second", "tags": ["bad\ud800"]}])
        assert refused.status_code == 422
        big = [{"user": "u", "object": f"big-{i}", "tags": [known], "title": "word " * 100}
               for i in range(200)]  # about 110 kB: over the limit
        full = post(url, big)
        assert full.status_code == 503 and "not stored" in full.json()["detail"]
        assert post(url, [{"user": "u", "object": "after-failure", "tags": [known, "Later"]}]
                    ).status_code == 200
        assert applied(url)["d_objects"] == base + 2
    finally:
        process.kill()  # SIGKILL: no shutdown handler runs
        process.wait(timeout=30)
    lines = (folder / "journal.jsonl").read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == 3  # two whole records, no torn tail
    restarted = TagRecommender.load(folder)  # what the next start reads
    assert len(restarted.train_objects) == len(fitted[2].train_objects) + 2
    tags = [tag for tag, _ in restarted.recommend_tags(tags=[known], k=1000).tags]
    assert set(separators) | {"Later"} <= set(tags)


def wait_for(url, process, timeout=120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert process.poll() is None, process.communicate()[0].decode()[-2000:]
        time.sleep(0.3)
    pytest.fail("the server did not start")


def test_a_torn_batch_is_left_out_whole_and_the_next_append_starts_a_fresh_line(fitted,
                                                                                tmp_path):
    folder = copy_of(fitted, tmp_path)
    recommender = TagRecommender.load(folder)
    known = recommender.display[0]
    n_d = len(recommender.train_objects)
    recommender.add_posts([{"user": "u", "object": "whole", "tags": [known]}])
    record = json.dumps({"posts": [{"user": "u", "object": f"cut-{i}", "tags": [known]}
                                   for i in range(40)]})
    with open(folder / "journal.jsonl", "a") as handle:
        handle.write(record[: len(record) // 2])  # a kill -9 inside the batch's write
    reloaded = TagRecommender.load(folder)
    assert len(reloaded.train_objects) == n_d + 1  # none of the 40
    reloaded.add_posts([{"user": "u", "object": "next", "tags": [known]}])
    again = TagRecommender.load(folder)
    assert len(again.train_objects) == n_d + 2


@pytest.mark.parametrize(("line", "says"), [
    ('{"foo": 1}', "posts"),
    ('{"posts": [{"user": "u", "object": "o", "tags": [null]}]}', "tags"),
    ('{"posts": [{"user": "u", "object": "o", "tags": "injected"}]}', "tags"),
    ('["not", "a", "record"]', "record"),
])
def test_a_journal_line_with_the_wrong_schema_is_refused_naming_it(fitted, tmp_path, line,
                                                                     says):
    folder = copy_of(fitted, tmp_path)
    (folder / "journal.jsonl").write_text(
        '{"posts": [{"user": "u", "object": "fine", "tags": ["x"]}]}\n' + line + "\n")
    with pytest.raises(UnreadableFileError, match=r"journal\.jsonl:2: .*" + says):
        TagRecommender.load(folder)


def test_a_bad_journal_stops_the_service_in_one_line(fitted, tmp_path):
    folder = copy_of(fitted, tmp_path)
    (folder / "journal.jsonl").write_text('{"posts": [{"user": "u", "object": "o", '
                                          '"tags": "injected"}]}\n')
    code, stderr = refused_start(folder, "--read-only")
    assert code == 2 and "Traceback" not in stderr, stderr
    assert stderr.strip().splitlines()[-1].startswith("error: ") and "journal.jsonl:1" in stderr


def test_a_journal_of_one_post_a_line_still_reads(fitted, tmp_path):
    folder = copy_of(fitted, tmp_path)
    known = fitted[2].display[0]
    (folder / "journal.jsonl").write_text(json.dumps(
        {"user": "u", "object": "old-format", "tags": [known, "Oldtag"], "title": "x"}) + "\n")
    recommender = TagRecommender.load(folder)
    assert "Oldtag" in dict(recommender.recommend_tags(tags=[known], k=1000).tags)


# --------------------------------------------------------------------------- bounds
def test_new_tags_are_bounded_per_request_and_in_total(guarded, fitted):
    url = guarded[0]
    known = fitted[2].display[0]

    def new(prefix, n):
        return post(url, [{"user": "u", "object": f"{prefix}-obj",
                           "tags": [known, *(f"{prefix}{i}" for i in range(n))]}])

    too_many = new("many", PER_REQUEST + 1)
    assert too_many.status_code == 413 and "--max-new-tags-per-request" in too_many.text
    assert new("first", PER_REQUEST).status_code == 200
    assert new("second", PER_REQUEST).status_code == 200
    over = new("third", IN_TOTAL - 2 * PER_REQUEST + 1)
    assert over.status_code == 422 and "--max-new-tags" in over.text
    assert post(url, [{"user": "u", "object": "known-only", "tags": [known]}]
                ).status_code == 200
    tags = recommended(url, [known]) if applied(url)["pending_posts"] == 0 else []
    assert "first0" in tags and not any(tag.startswith(("many", "third")) for tag in tags)


def peak_memory_kb(pid):
    with open(f"/proc/{pid}/status") as handle:
        status = handle.read()
    return int(next(line.split()[1] for line in status.splitlines()
                    if line.startswith("VmHWM")))


def test_a_chunked_body_is_cut_at_the_limit(guarded):
    url, process, _ = guarded
    before = peak_memory_kb(process.pid)
    port = int(url.rsplit(":", 1)[1])
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    received = bytearray()

    def read():
        try:
            while chunk := sock.recv(65536):
                received.extend(chunk)
        except OSError:
            pass

    reader = threading.Thread(target=read)
    sock.sendall(b"POST /v1/tags HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
                 b"\r\nTransfer-Encoding: chunked\r\n\r\n")
    reader.start()
    chunk, sent = b"x" * 65536, 0
    try:
        while sent < 300 << 20:
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            sent += len(chunk)
    except OSError:
        pass
    reader.join(timeout=30)
    sock.close()
    assert received.startswith(b"HTTP/1.1 413"), bytes(received[:200])
    assert sent < 64 << 20  # stopped early, not after the whole body
    assert peak_memory_kb(process.pid) - before < 64 << 10


def raw_connection(url):
    return socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=10)


def read_all(sock):
    """Everything the server sends until it closes the connection."""
    answer = b""
    while chunk := sock.recv(4096):
        answer += chunk
    return answer


def test_half_sent_headers_and_bodies_time_out(guarded):
    url = guarded[0]
    start = time.monotonic()
    with raw_connection(url) as sock:
        sock.sendall(b"POST /v1/tags HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        answer = read_all(sock)
    assert answer.startswith(b"HTTP/1.1 408") and time.monotonic() - start < 8
    with raw_connection(url) as sock:
        sock.sendall(b"POST /v1/tags HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                     b"application/json\r\nContent-Length: 100\r\n\r\n{\"k\"")
        answer = read_all(sock)
    assert answer.startswith(b"HTTP/1.1 408") and b"body" in answer


def test_connections_past_the_limit_are_refused_at_once(guarded):
    url = guarded[0]
    sockets = [raw_connection(url) for _ in range(40)]
    try:
        time.sleep(0.3)
        refused = 0
        for sock in sockets:
            sock.settimeout(0.2)
            with contextlib.suppress(TimeoutError):
                refused += sock.recv(4096).startswith(b"HTTP/1.1 503")
        assert refused >= 10
    finally:
        for sock in sockets:
            sock.close()
    time.sleep(0.3)
    assert httpx.get(f"{url}/health", timeout=10).status_code == 200


def test_a_client_that_leaves_mid_body_is_dropped_quietly(guarded):
    url = guarded[0]
    with raw_connection(url) as sock:
        sock.sendall(b"POST /v1/tags HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                     b"application/json\r\nContent-Length: 1000\r\n\r\n{\"tags\": [")
    time.sleep(0.5)
    assert httpx.get(f"{url}/health", timeout=10).status_code == 200  # no traceback: fixture


# --------------------------------------------------------------------------- 422 not 500
@pytest.mark.parametrize(("path", "body"), [
    ("/v1/tags", '{"texts": {"k": "x"}}'),
    ("/v1/tags", '{"texts": {"tags": "x"}}'),
    ("/v1/tags", '{"k": NaN}'),
    ("/v1/tags", '{"title": Infinity}'),
    ("/v1/tags", '{"tags": [NaN]}'),
    ("/v1/tags", '{"tags": ["\\ud800"]}'),
    ("/v1/posts", '{"posts": [{"user": "u", "object": "o", "tags": ["a"], '
                  '"texts": {"object": "other"}}]}'),
    ("/v1/posts", '{"posts": [{"user": "u", "object": "o", "tags": [-Infinity]}]}'),
])
def test_bad_values_get_422_never_500(guarded, path, body):
    url = guarded[0]
    response = httpx.post(f"{url}{path}", content=body.encode(), timeout=30,
                          headers={"content-type": "application/json", **AUTH})
    assert response.status_code == 422, response.text


def test_a_long_text_in_texts_is_bounded_like_the_title():
    from pydantic import ValidationError

    from tagtorch.serving.schema import MAX_TEXT_CHARS, PostBatch, TagRequest

    long = "a" * (MAX_TEXT_CHARS + 1)
    for model, body in ((PostBatch, {"posts": [{"user": "u", "object": "o", "tags": ["a"],
                                                "texts": {"description": long}}]}),
                        (TagRequest, {"texts": {"description": long}})):
        with pytest.raises(ValidationError, match=r"texts\.description\s+.* at most 100000 "):
            model.model_validate(body)
        model.model_validate(json.loads(json.dumps(body).replace(long, long[1:])))


def test_a_refusal_does_not_echo_the_request(guarded):
    body = {"posts": [{"user": "u", "object": "o", "tags": "x" * 15_000}]}  # under --max-body
    response = httpx.post(f"{guarded[0]}/v1/posts", json=body, headers=AUTH, timeout=30)
    assert response.status_code == 422 and len(response.content) < 2000, response.text[:300]


def test_the_rule_cache_survives_posts(fitted, tmp_path):
    recommender = TagRecommender.load(copy_of(fitted, tmp_path))
    recommender.rule_cache = 16
    recommender.add_posts([{"user": "u", "object": "o", "tags": [recommender.display[0]]}])
    assert recommender.generator.rules.cache_size == 16 == recommender.rule_cache


# --------------------------------------------------------------------------- folders
@pytest.mark.integration
def test_folders_that_cannot_take_posts_are_refused_at_the_start(fitted, tmp_path, guarded):
    (tmp_path / "token").write_text(TOKEN)
    token = ("--token-file", str(tmp_path / "token"))
    full = copy_of(fitted, tmp_path, "full")
    code, stderr = refused_start(full, *token, file_size_limit=32_768)  # a nearly full disk
    assert code == 2 and "--read-only" in stderr.strip().splitlines()[-1], stderr
    if os.geteuid() != 0:  # root writes into a read-only folder anyway
        os.chmod(full, 0o555)
        try:
            code, stderr = refused_start(full, *token)
        finally:
            os.chmod(full, 0o755)
        assert code == 2 and "--read-only" in stderr.strip().splitlines()[-1], stderr
    dangling = copy_of(fitted, tmp_path, "dangling")
    (dangling / "journal.jsonl").symlink_to(tmp_path / "elsewhere.jsonl")
    code, stderr = refused_start(dangling, *token)
    assert code == 2 and "symbolic link" in stderr.strip().splitlines()[-1], stderr
    assert not (tmp_path / "elsewhere.jsonl").exists()
    code, stderr = refused_start(guarded[2], *token)  # served by the guarded service
    assert code == 2 and "another process" in stderr.strip().splitlines()[-1], stderr
    code, stderr = refused_start(guarded[2], "--read-only")
    assert code == 2 and "another process" in stderr.strip().splitlines()[-1], stderr


def test_a_compaction_cut_short_is_dropped_or_finished(fitted, tmp_path):
    folder = copy_of(fitted, tmp_path)
    recommender = TagRecommender.load(folder)
    known = recommender.display[0]
    recommender.add_posts([{"user": "u", "object": "kept", "tags": [known, "Kepttag"]}])
    (folder / COMPACTION_FOLDER).mkdir()
    (folder / COMPACTION_FOLDER / "data.npz").write_bytes(b"half written")
    finish_compaction(folder)  # no READY marker: dropped, the folder is as it was
    assert not (folder / COMPACTION_FOLDER).exists()
    assert TagRecommender.load(folder).recommend_tags(tags=[known], k=1000).tags
    loaded = TagRecommender.load(folder)
    assert loaded.compact() and not (folder / "journal.jsonl").exists()
    assert "Kepttag" in dict(TagRecommender.load(folder).recommend_tags(tags=[known],
                                                                        k=1000).tags)
