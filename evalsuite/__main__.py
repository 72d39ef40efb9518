from evalsuite.cli import main

raise SystemExit(main())
