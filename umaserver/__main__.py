from umaserver.cli import main

main(prog_name="python -m umaserver")
