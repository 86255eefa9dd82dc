from llmtriage.cli.app import main

raise SystemExit(main())
