from dlperf.cli import main

raise SystemExit(main())
