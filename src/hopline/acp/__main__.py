from hopline.acp.cli import main

raise SystemExit(main())
