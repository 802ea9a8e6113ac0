"""bin/airlock mcp, driven by the official `mcp` package's client over
stdio, against the real cluster (and once in --local mode); then the raw
protocol's edges, line by line."""
import json
import os
import subprocess
import time

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

import airlock
from conftest import BIN


def server(cluster, namespace, *extra):
    return StdioServerParameters(
        command=os.path.join(BIN, "airlock"),
        args=["mcp", "-n", namespace, "--kubeconfig", cluster["KUBECONFIG_ADMIN"], *extra])


def text(result):
    assert len(result.content) == 1 and result.content[0].type == "text"
    return result.content[0].text


def session_run(params, body):
    async def main():
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as s:
                return await body(s)

    return anyio.run(main)


def test_session(cluster, namespace):
    async def body(s):
        init = await s.initialize()
        assert init.protocol_version == "2025-11-25"
        assert init.server_info.name == "airlock"
        assert init.capabilities.tools is not None
        await s.send_ping()
        tools = (await s.list_tools()).tools
        assert [t.name for t in tools] == ["run_code", "open_session", "close_session"]
        assert tools[0].input_schema["required"] == ["code"]
        assert set(tools[0].input_schema["properties"]) == \
            {"code", "runtime", "stdin", "files", "timeout_seconds", "session"}

        r = await s.call_tool("run_code", {"code": "print(6*7)"})
        assert (text(r), r.is_error) == ("exit code: 0\n--- stdout ---\n42\n", False)
        r = await s.call_tool("run_code", {
            "code": "cat data.txt; read x; echo \"got $x\"; echo bad >&2; exit 3",
            "runtime": "bash", "stdin": "line\n", "files": {"data.txt": "file\n"},
            "timeout_seconds": 30})
        assert (text(r), r.is_error) == \
            ("exit code: 3\n--- stdout ---\nfile\ngot line\n--- stderr ---\nbad\n", True)
        r = await s.call_tool("run_code", {"code": "while True: pass", "timeout_seconds": 1})
        assert (text(r), r.is_error) == \
            ("DeadlineExceeded: killed at its 1000 ms deadline (exit code 137)", True)
        # Bad arguments: a tool error naming the argument, never a crash.
        r = await s.call_tool("run_code", {"code": "x", "timeout_seconds": 0})
        assert (text(r), r.is_error) == ("error: the call was refused: timeout_seconds: "
                                         "must be an integer from 1 to 3600", True)
        r = await s.call_tool("run_code", {"code": "x", "files": {"../up": "x"}})
        assert r.is_error and text(r).startswith("error: the call was refused: spec.files")
        r = await s.call_tool("run_code", {"code": "x", "runtime": "cobol"})
        assert r.is_error and text(r).startswith("Rejected: ")
        assert "cobol" in text(r)
        r = await s.call_tool("run_code", {})
        assert (text(r), r.is_error) == \
            ("error: the call was refused: code: required, a non-empty string", True)
        # The server still answers.
        await s.send_ping()

    session_run(server(cluster, namespace), body)


# A 1x1 PNG, written by the program as bytes.
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c6360f8cfc0f01f0005000201e221bc33"
                    "0000000049454e44ae426082")


def test_image_out(cluster, namespace):
    """A PNG the program leaves in /airlock/out/ comes back as image
    content, after the text, which lists every file out."""
    import base64

    code = ("import os\nos.makedirs('/airlock/out', exist_ok=True)\n"
            "open('/airlock/out/dot.png', 'wb').write(bytes.fromhex(%r))\n"
            "open('/airlock/out/n.txt', 'w').write('7')\n" % PNG.hex())

    async def body(s):
        await s.initialize()
        r = await s.call_tool("run_code", {"code": code})
        assert not r.is_error
        assert [c.type for c in r.content] == ["text", "image"]
        assert r.content[0].text == ("exit code: 0\n--- files out ---\n"
                                     "dot.png (image/png, %d bytes)\n"
                                     "n.txt (text/plain, 1 bytes)\n" % len(PNG))
        assert r.content[1].mime_type == "image/png"   # "mimeType" on the wire
        assert base64.b64decode(r.content[1].data) == PNG

    session_run(server(cluster, namespace), body)


def test_cancel(cluster, namespace):
    """The client gives up on a call (its read timeout: the mcp client
    sends notifications/cancelled), and the execution ends Cancelled while
    the session is still open: leaving it would close stdin, which cancels
    everything, so the cancellation itself must do it."""
    marker = "cancel-me-%s" % os.urandom(3).hex()
    c = airlock.Client(namespace=namespace, kubeconfig=cluster["KUBECONFIG_ADMIN"])

    def mine():
        items = c._api.list_namespaced_custom_object("airlock.dev", "v1alpha1", namespace,
                                                     "codeexecutions")["items"]
        return [o["metadata"]["name"] for o in items if marker in o["spec"]["source"]]

    async def body(s):
        await s.initialize()
        with pytest.raises(Exception):
            await s.call_tool("run_code", {
                "code": "import time\n# %s\nwhile True: time.sleep(0.1)\n" % marker,
                "timeout_seconds": 120}, read_timeout_seconds=8)
        names = await anyio.to_thread.run_sync(mine)
        assert len(names) == 1 and names[0].startswith("mcp-")
        end = time.monotonic() + 60
        while (await anyio.to_thread.run_sync(c.get, names[0])).phase != "Cancelled":
            assert time.monotonic() < end, c.get(names[0])
            await anyio.sleep(0.2)
        await s.send_ping()     # the session was open all along
        return names[0]

    name = session_run(server(cluster, namespace), body)
    assert c.get(name).reason == "Cancelled"


def test_session_tools(cluster, session_namespace):
    """open_session: the name as text and as structured content (its
    outputSchema's); close_session: Closed, and again the same; a runtime
    without sessions, a missing session: said, naming the field."""
    c = airlock.Client(namespace=session_namespace, kubeconfig=cluster["KUBECONFIG_ADMIN"])

    async def body(s):
        await s.initialize()
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert tools["open_session"].input_schema["required"] == ["runtime"]
        assert tools["open_session"].output_schema["required"] == ["session", "runtime"]
        assert tools["close_session"].input_schema["required"] == ["name"]
        r = await s.call_tool("open_session", {"runtime": "python", "idle_timeout_seconds": 60})
        assert not r.is_error, text(r)
        name = text(r)
        assert name.startswith("session-") and len(name) == 13
        assert r.structured_content == {"session": name, "runtime": "python"}
        st = await anyio.to_thread.run_sync(c._get, name, "codesessions")
        assert st["status"]["phase"] == "Ready"
        assert st["spec"]["idleTimeoutSeconds"] == 60
        r = await s.call_tool("close_session", {"name": name})
        assert (text(r), r.is_error) == \
            ("session %s has ended: Closed: closed by spec.close" % name, False)
        r = await s.call_tool("close_session", {"name": name})
        assert (text(r), r.is_error) == \
            ("session %s has ended: Closed: closed by spec.close" % name, False)
        r = await s.call_tool("close_session", {"name": "nope"})
        assert (text(r), r.is_error) == ("error: the call was refused: name: no session "
                                         "'nope' in namespace %s" % session_namespace, True)
        r = await s.call_tool("run_code", {"code": "1", "session": "nope"})
        assert (text(r), r.is_error) == ("error: the call was refused: spec.session: no "
                                         "session 'nope' in namespace %s" % session_namespace,
                                         True)
        r = await s.call_tool("open_session", {"runtime": "cobol"})
        assert (text(r), r.is_error) == \
            ("Rejected: spec.runtime: 'cobol' is not a runtime of this cluster", True)
        assert r.structured_content is None
        await s.send_ping()

    session_run(server(cluster, session_namespace), body)


def test_session_steps(cluster, session_namespace):
    """run_code naming a session: each call its next step, the state kept,
    the last expression's value after the streams."""
    async def body(s):
        await s.initialize()
        r = await s.call_tool("open_session", {"runtime": "python"})
        assert not r.is_error, text(r)
        name = r.structured_content["session"]
        r = await s.call_tool("run_code", {"code": "x = 41", "session": name})
        assert (text(r), r.is_error) == ("exit code: 0", False)
        r = await s.call_tool("run_code", {"code": "print('hi')\nx + 1", "session": name})
        assert (text(r), r.is_error) == \
            ("exit code: 0\n--- stdout ---\nhi\n--- value ---\n42\n", False)
        # The runtime is the session's; another is refused by the controller.
        r = await s.call_tool("run_code", {"code": "x", "session": name, "runtime": "bash"})
        assert r.is_error and text(r).startswith("Rejected: spec.runtime: ")
        r = await s.call_tool("close_session", {"name": name})
        assert not r.is_error
        r = await s.call_tool("run_code", {"code": "x", "session": name})
        assert (text(r), r.is_error) == \
            ("Rejected: spec.session: session '%s' has ended (Closed)" % name, True)

    session_run(server(cluster, session_namespace), body)


def test_local(cluster):
    params = StdioServerParameters(command=os.path.join(BIN, "airlock"),
                                   args=["mcp", "--local", "--runsc", cluster["RUNSC"]])

    async def body(s):
        init = await s.initialize()
        assert "this machine" in init.instructions
        # Sessions need a cluster: not offered here.
        tools = (await s.list_tools()).tools
        assert [t.name for t in tools] == ["run_code"]
        assert "session" not in tools[0].input_schema["properties"]
        r = await s.call_tool("run_code", {"code": "import sys\nprint('here')\nsys.exit(1)"})
        first = text(r), r.is_error
        # A NUL in the output is kept, not an end of the text.
        r = await s.call_tool("run_code", {"code": "print('a\\0b')"})
        return first, (text(r), r.is_error)

    assert session_run(params, body) == (("exit code: 1\n--- stdout ---\nhere\n", True),
                                         ("exit code: 0\n--- stdout ---\na\0b\n", False))


def raw(lines, *args, wait=0.5):
    """Lines in, the server's lines out (stdout), and its stderr."""
    p = subprocess.Popen([os.path.join(BIN, "airlock"), "mcp", *args], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for l in lines:
        p.stdin.write(l if isinstance(l, bytes) else l.encode() + b"\n")
    p.stdin.flush()
    time.sleep(wait)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    return [json.loads(l) for l in out.decode().splitlines()], err


def test_raw_protocol():
    out, _ = raw([
        '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"1999-01-01"}}',
        '{"jsonrpc":"2.0","id":"two","method":"initialize","params":{"protocolVersion":"2024-11-05"}}',
        'not json',
        '[{"jsonrpc":"2.0","id":3,"method":"ping"}]',
        '{"jsonrpc":"1.0","id":4,"method":"ping"}',
        '{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}',
        '{"jsonrpc":"2.0","id":5,"method":"resources/list"}',
        '{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"rm"}}',
        '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":[1]}',
        '{"jsonrpc":"2.0","method":"notifications/whatever"}',
        '',
        '{"jsonrpc":"2.0","id":8,"method":"ping"}',
        '{"jsonrpc":"2.0","id":9,"method":7}',
        '{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"run_code",'
        '"arguments":{"code":"x","%s\u00e9":1}}}' % ("a" * 63),
    ], wait=1.5)
    assert out[0]["id"] == 1 and out[0]["result"]["protocolVersion"] == "2025-11-25"
    assert out[1]["id"] == "two" and out[1]["result"]["protocolVersion"] == "2024-11-05"
    assert [(o["id"], o["error"]["code"]) for o in out[2:8]] == [
        (None, -32700), (None, -32600), (None, -32600), (None, -32600), (5, -32601),
        (6, -32602)]
    assert (out[8]["id"], out[8]["error"]["code"]) == (7, -32602)
    assert out[9] == {"jsonrpc": "2.0", "id": 8, "result": {}}
    assert (out[10]["id"], out[10]["error"]["code"]) == (9, -32600)
    # An argument's name cut inside a character: still a response, UTF-8.
    assert out[11]["id"] == 10 and out[11]["result"]["isError"] is True
    assert out[11]["result"]["content"][0]["text"] == \
        'error: the call was refused: arguments: unknown argument "%s"' % ("a" * 63)
    assert len(out) == 12


def test_raw_session_refusals():
    """The session tools' bad arguments, refused before any cluster is
    asked, each naming the argument; with --local they are not tools."""
    call = '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s","arguments":%s}}'
    # At most 8 calls in flight (MCP_CALLS_MAX): two servers.
    out, _ = raw([
        '{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
        call % (2, "open_session", '{}'),
        call % (3, "open_session", '{"runtime":"python","idle_timeout_seconds":5}'),
        call % (4, "open_session", '{"runtime":"python","memory":"lots"}'),
        call % (5, "open_session", '{"runtime":"Python"}'),
        call % (6, "open_session", '{"runtime":"python","files":{}}'),
        call % (7, "open_session", '{"runtime":"%s"}' % ("p" * 64)),
    ], "--kubeconfig", "/nonexistent", wait=1.5)
    more, _ = raw([
        call % (8, "close_session", '{}'),
        call % (9, "close_session", '{"name":7}'),
        call % (10, "run_code", '{"code":"1","session":""}'),
        call % (11, "run_code", '{"code":"1","session":"%s"}' % ("s" * 254)),
    ], "--kubeconfig", "/nonexistent", wait=1.5)
    by_id = {o["id"]: o for o in out + more}
    assert len(by_id) == 11
    tools = by_id[1]["result"]["tools"]
    assert [t["name"] for t in tools] == ["run_code", "open_session", "close_session"]
    assert tools[1]["outputSchema"] == {
        "type": "object", "properties": {"session": {"type": "string"},
                                         "runtime": {"type": "string"}},
        "required": ["session", "runtime"]}
    refused = "error: the call was refused: "
    assert {i: (by_id[i]["result"]["content"][0]["text"], by_id[i]["result"]["isError"])
            for i in range(2, 12)} == {
        2: (refused + "runtime: required (python, python-data, bash)", True),
        3: (refused + "idle_timeout_seconds: must be an integer from 10 to 86400", True),
        4: (refused + "memory: spec.resources.memory: must be a positive quantity such "
            "as 500m or 1Gi, not 'lots'", True),
        5: (refused + "runtime: spec.runtime: must be a lower-case name such as python",
            True),
        6: (refused + 'arguments: unknown argument "files"', True),
        7: (refused + "runtime: must be a string of 1 to 63 bytes", True),
        8: (refused + "name: required, a session's name", True),
        9: (refused + "name: must be a string of 1 to 253 bytes", True),
        10: (refused + "session: must be a string of 1 to 253 bytes", True),
        11: (refused + "session: must be a string of 1 to 253 bytes", True),
    }

    out, _ = raw([
        '{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
        call % (2, "open_session", '{"runtime":"python"}'),
        call % (3, "run_code", '{"code":"1","session":"s"}'),
    ], "--local", wait=1.5)
    by_id = {o["id"]: o for o in out}
    assert [t["name"] for t in by_id[1]["result"]["tools"]] == ["run_code"]
    assert by_id[2]["error"] == {"code": -32602,
                                 "message": "unknown tool: tools/list has run_code"}
    assert by_id[3]["result"]["content"][0]["text"] == \
        refused + "session: sessions need a cluster (this server runs with --local)"


def test_raw_line_cap():
    """A line over 4 MiB is read to its end and refused; the next one is
    answered."""
    big = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"' + b"a" * (5 << 20) + b'"}}\n'
    out, _ = raw([big, '{"jsonrpc":"2.0","id":2,"method":"ping"}'])
    assert out == [{"jsonrpc": "2.0", "id": None,
                    "error": {"code": -32700, "message": "message longer than 4 MiB"}},
                   {"jsonrpc": "2.0", "id": 2, "result": {}}]
