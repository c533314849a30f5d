import sys

try:
    from .cli.launch import main
except KeyboardInterrupt:  # Ctrl-C while the launcher itself is imported: one line, as later
    sys.stderr.write("journal: interrupted\n")
    sys.exit(130)

sys.exit(main())
