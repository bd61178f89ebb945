"""The `commwall` command line: `main` dispatches to one module per subcommand in `commands/`;
`text_report` renders a report as text. It calls analysis (and dashboard for `serve`) and holds
no metric logic."""
