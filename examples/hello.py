import platform, sys

print("hello from gVisor:", platform.system(), platform.release())
print("this line went to stderr", file=sys.stderr)
