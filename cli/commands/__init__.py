"""One module per `commwall` subcommand, each with `add_parser(subparsers)`."""
