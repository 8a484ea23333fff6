"""The loopback addresses of the Ray tests' cluster (tests/ray/conftest.py): a module of its
own, because ``from conftest import …`` picks whichever conftest was imported first."""

#: The head node's address; the other nodes take 127.0.0.3, 127.0.0.4, ….
HEAD_IP = "127.0.0.2"
#: The shared private memcached's address.
SERVER_IP = "127.0.0.5"
