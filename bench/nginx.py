"""nginx for the benchmarks: one instance per configuration, every file under its prefix."""

import os

_ECHO_MODULE = "load_module /usr/lib/nginx/modules/ngx_http_echo_module.so;"


def start_nginx(wan, ns, prefix, http_block, address, port, workers="1"):
    """Writes prefix/nginx.conf around http_block (what goes inside `http { }`), starts
    nginx in namespace ns, and returns its process once it listens on address:port."""
    config = os.path.join(prefix, "nginx.conf")
    with open(config, "w") as out:
        out.write(f"""
daemon off;
worker_processes {workers};
pid {prefix}/nginx.pid;
{_ECHO_MODULE}
events {{ worker_connections 8192; }}
http {{
  client_body_temp_path {prefix}/client_body;
  proxy_temp_path {prefix}/proxy;
  fastcgi_temp_path {prefix}/fastcgi;
  uwsgi_temp_path {prefix}/uwsgi;
  scgi_temp_path {prefix}/scgi;
  keepalive_requests 1000000;  # also bounds requests per HTTP/2 connection
{http_block}
}}
""")
    process = wan.spawn(ns, ["nginx", "-c", config, "-p", prefix, "-e",
                             os.path.join(prefix, "error.log")])
    wan.wait_for_port(ns, address, port)
    return process
