#!/usr/bin/python3
# HTTP on :8080 and TLS on :8443 of the address given; answers with the Host and SNI it saw.
import sys, ssl, threading, http.server, socketserver
addr = sys.argv[1]
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        sni = getattr(self.connection, 'sni', '-')
        body = ('backend=%s host=%s sni=%s\n' % (addr, self.headers.get('Host'), sni)).encode()
        self.send_response(200); self.send_header('Content-Length', str(len(body))); self.end_headers(); self.wfile.write(body)
class S(socketserver.ThreadingMixIn, http.server.HTTPServer): daemon_threads = True
h = S((addr, 8080), H); threading.Thread(target=h.serve_forever, daemon=True).start()
t = S((addr, 8443), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain('/tmp/sqp/pd/be.crt', '/tmp/sqp/pd/be.key')
def cb(sock, name, c): sock.sni = name
ctx.sni_callback = cb
t.socket = ctx.wrap_socket(t.socket, server_side=True)
t.serve_forever()
