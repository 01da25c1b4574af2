"""Servers an agent would start inside a sandbox, run there as the sandbox's main process by
test_router_ports.py (`python3 -c` of this file's text, stdlib and grpcio only):

* 127.0.0.1:8000, HTTP/1.1 (threaded): `/` a page whose script echoes a message over a WebSocket
  and writes the answer into the DOM; `/ws` a WebSocket echo (RFC 6455, text frames);
  `/stream` a chunked body in three pieces 0.2 s apart; `/healthz` the server's own; `/echo`
  the request's method, path, Host and Cookie as JSON (POST: the body's length too);
  `/loaded` answers once the WebSocket echo has been sent (holds the page's load event until
  the DOM has the echo, for `chromium --dump-dom`).
* 127.0.0.1:8001, gRPC over h2c: the generic method /test.Echo/Say echoes its bytes.

Only loopback: nothing outside the sandbox's network namespace could reach them."""
import base64
import hashlib
import http.server
import json
import socketserver
import struct
import threading
import time

PAGE = b"""<!doctype html><html><body><p id="out">waiting</p>
<script>
const ws = new WebSocket("ws://" + location.host + "/ws");
ws.onopen = () => ws.send("hello from the browser");
ws.onmessage = (e) => { document.getElementById("out").textContent = "echo: " + e.data; };
</script><img src="/loaded" alt=""></body></html>"""

echoed = threading.Event()  # the page's own message was echoed (cleared when the page is served)


def ws_frames(rfile):
    while True:
        h = rfile.read(2)
        if len(h) < 2:
            return
        op, n = h[0] & 0x0F, h[1] & 0x7F
        if n == 126:
            n = struct.unpack(">H", rfile.read(2))[0]
        elif n == 127:
            n = struct.unpack(">Q", rfile.read(8))[0]
        mask = rfile.read(4) if h[1] & 0x80 else b"\0\0\0\0"
        data = bytes(b ^ mask[i % 4] for i, b in enumerate(rfile.read(n)))
        if op == 8:
            return
        yield op, data


def ws_frame(op, data):
    n = len(data)
    head = bytes([0x80 | op, n]) if n < 126 else bytes([0x80 | op, 126]) + struct.pack(">H", n)
    return head + data


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, code, ctype, body):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/ws":
            key = self.headers["Sec-WebSocket-Key"]
            acc = base64.b64encode(hashlib.sha1(
                (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
            self.send_response(101)
            self.send_header("Upgrade", "websocket")
            self.send_header("Connection", "Upgrade")
            self.send_header("Sec-WebSocket-Accept", acc)
            self.end_headers()
            self.wfile.flush()
            for op, data in ws_frames(self.rfile):
                if op == 1:
                    self.wfile.write(ws_frame(1, data))
                    self.wfile.flush()
                    if data == b"hello from the browser":
                        echoed.set()
            self.close_connection = True
        elif self.path == "/":
            echoed.clear()
            self.reply(200, "text/html", PAGE)
        elif self.path == "/loaded":
            echoed.wait(20)
            time.sleep(0.3)  # the browser handles the echo's message event first
            self.reply(200, "image/gif", base64.b64decode(
                "R0lGODlhAQABAAAAACH5BAEKAAEALAAAAAABAAEAAAICTAEAOw=="))
        elif self.path == "/stream":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(3):
                piece = f"piece {i} {time.monotonic()}\n".encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()
                time.sleep(0.2)
            self.wfile.write(b"0\r\n\r\n")
        elif self.path == "/healthz":
            self.reply(200, "text/plain", b"the app's own healthz")
        else:
            self.echo()

    def do_POST(self):
        self.echo(len(self.rfile.read(int(self.headers.get("Content-Length", "0")))))

    def echo(self, got=None):
        body = json.dumps({"method": self.command, "path": self.path, "host": self.headers["Host"],
                           "cookie": self.headers.get_all("Cookie"), "got": got}).encode()
        self.reply(200, "application/json", body)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def grpc_server():
    import grpc
    from concurrent import futures
    s = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    s.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("test.Echo", {
        "Say": grpc.unary_unary_rpc_method_handler(lambda req, ctx: b"echo: " + req)}),))
    s.add_insecure_port("127.0.0.1:8001")
    s.start()
    return s


g = grpc_server()
print("serving", flush=True)
Server(("127.0.0.1", 8000), Handler).serve_forever()
