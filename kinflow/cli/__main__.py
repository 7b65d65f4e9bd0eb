from kinflow.cli.app import main

main()
