P=http://127.0.0.1:3128; : > access.log; : > helper.in
t(){ echo "== $1"; shift; timeout 12 "$@" 2>&1 | tail -2; echo; }
t "1 http allowed" curl -s -x $P http://allowed.test:8080/
t "2 http allowed, Host header says other" curl -s -x $P -H 'Host: other.test' http://allowed.test:8080/
t "3 http denied host" curl -s -o /dev/null -w '%{http_code}' -x $P http://other.test:8080/
t "4 tls allowed (SNI=host)" curl -sk -x $P https://allowed.test:8443/
t "5 tls SNI mismatch" openssl s_client -proxy 127.0.0.1:3128 -connect allowed.test:8443 -servername other.test -brief </dev/null
t "6 tls no SNI" openssl s_client -proxy 127.0.0.1:3128 -connect allowed.test:8443 -noservername -brief </dev/null
t "7 CONNECT denied host" curl -sk -x $P https://other.test:8443/ -w '%{http_code}'
t "8 ip literal" curl -sk -x $P https://127.0.0.2:8443/ -w '%{http_code}'
t "9 decimal literal" curl -sk -x $P https://2130706434:8443/ -w '%{http_code}'
t "10 rebind" curl -sk -x $P https://rebind.test:8443/ -w '%{http_code}'
t "11 multi (one internal)" curl -sk -x $P https://multi.test:8443/ -w '%{http_code}'
t "12 unresolvable" curl -sk -x $P https://nowhere.test:8443/ -w '%{http_code}'
t "13 other client ip" curl -sk --interface 127.0.0.5 -x $P https://allowed.test:8443/ -w '%{http_code}'
t "14 port not allowed" curl -s -x $P http://allowed.test:22/ -o /dev/null -w '%{http_code}'
t "15 non-TLS in CONNECT" curl -s -p -x $P http://allowed.test:8080/ -w '%{http_code}'
t "16 v4-mapped AAAA" curl -sk -x $P https://mapped.test:8443/ -w '%{http_code}'
t "17 origin-form to proxy" python3 -c "
import socket; s=socket.create_connection(('127.0.0.1',3128)); s.sendall(b'GET / HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n'); print(s.recv(200).split(b'\r\n')[0])"
t "18 http ip literal Host" curl -s -x $P http://127.0.0.2:8080/ -o /dev/null -w '%{http_code}'
sleep 1; cat access.log
