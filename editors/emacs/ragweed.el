;;; ragweed.el --- Search and ask a local ragweedd index -*- lexical-binding: t; -*-

;; Version: 0.1
;; Package-Requires: ((emacs "27.1"))
;; Keywords: tools, matching

;;; Commentary:

;; M-x ragweed-search  search the ragweedd index: pick a hit with `completing-read' (or, with
;;                     C-u or `ragweed-results' set to `xref', browse them in an *xref* buffer);
;;                     the hit opens at its place: a text file at the cited line, a PDF in its
;;                     viewer at the page, anything else through the system opener.
;; M-x ragweed-ask     ask a question: the answer and its numbered sources in *ragweed answer*,
;;                     where RET on a [N] opens that source (C-u: the sources in *xref* too).
;;
;; Every request goes through `ragweedctl --json', so this package finds the daemon exactly as
;; ragweedctl does (--state-dir, else $RAGWEED_STATE_DIR, else the OS state directory) and
;; inherits its checks: the API token is sent only to a daemon that proved it knows it.  Errors
;; are ragweedctl's own words, shown as a message, never a backtrace.

;;; Code:

(require 'cl-lib)
(require 'json)
(require 'subr-x)
(require 'url-util)
(require 'xref)

(defgroup ragweed nil
  "Search and ask a local ragweedd index."
  :group 'tools
  :prefix "ragweed-")

(defcustom ragweed-ragweedctl '("ragweedctl")
  "How to run ragweedctl: the program and its first arguments."
  :type '(repeat string))

(defcustom ragweed-state-dir nil
  "Passed on to ragweedctl as --state-dir; nil lets ragweedctl find the daemon."
  :type '(choice (const nil) directory))

(defcustom ragweed-collections nil
  "Only these collections (nil: all)."
  :type '(repeat string))

(defcustom ragweed-path-glob nil
  "Only files whose path matches this glob, e.g. \"*/notes/*\" (nil: all)."
  :type '(choice (const nil) string))

(defcustom ragweed-limit 20
  "Hits of a search, passages retrieved for an answer."
  :type 'integer)

(defcustom ragweed-results 'completing-read
  "Where hits go: `completing-read' or `xref'.  A prefix argument picks the other."
  :type '(choice (const completing-read) (const xref)))

(defcustom ragweed-pdf-viewer nil
  "A PDF viewer's command with {path}, {page} and {uri} filled in.
For example (\"zathura\" \"--page={page}\" \"{path}\").  nil: the desktop's
PDF viewer when it takes a page (see `ragweed-pdf-viewers'), else the
system opener (xdg-open, open), which opens the first page."
  :type '(choice (const nil) (repeat string)))

;; PDF viewers that take a page on their command line, by a word of the desktop file
;; `xdg-mime query default application/pdf' names.  xdg-open cannot pass a page: its generic path
;; drops a #page= fragment and GNOME's `gio open' refuses a file uri that has one.
(defvar ragweed-pdf-viewers
  '(("evince" ("evince") ("--page-index={page}" "{path}"))
    ("atril" ("atril") ("--page-index={page}" "{path}"))
    ("xreader" ("xreader") ("--page-index={page}" "{path}"))
    ("okular" ("okular") ("--page" "{page}" "{path}"))
    ("zathura" ("zathura") ("--page={page}" "{path}"))
    ("sioyek" ("sioyek") ("--page" "{page}" "{path}"))
    ("qpdfview" ("qpdfview") ("--unique" "{path}#{page}"))
    ("mupdf" ("mupdf") ("{path}" "{page}"))
    ("xpdf" ("xpdf") ("{path}" "{page}"))
    ("firefox" ("firefox" "firefox-esr") ("{uri}"))
    ("chromium" ("chromium" "chromium-browser") ("{uri}"))
    ("chrome" ("google-chrome" "google-chrome-stable") ("{uri}")))
  "(WORD BINARIES ARGS): the viewer whose desktop file names WORD, run as the first of
BINARIES found, with ARGS ({path}, {page}, {uri} filled in).")

(defun ragweed--fail (fmt &rest args)
  "Signal a `user-error' \"ragweed: ...\": shown as a message, never a backtrace."
  (user-error "ragweed: %s" (apply #'format fmt args)))

;;;; ragweedctl

(defun ragweed--argv (args)
  (append (cdr ragweed-ragweedctl) '("--json")
          (when ragweed-state-dir (list "--state-dir" (expand-file-name ragweed-state-dir)))
          args))

(defun ragweed--filters ()
  (append (list "-n" (number-to-string ragweed-limit))
          (apply #'append (mapcar (lambda (c) (list "-c" c)) ragweed-collections))
          (when ragweed-path-glob (list "--path-glob" ragweed-path-glob))))

(defun ragweed--parse (code stdout stderr)
  "The JSON object ragweedctl printed, or a `user-error' in its own words."
  (let ((res (condition-case nil
                 (let ((json-object-type 'alist) (json-array-type 'list) (json-key-type 'symbol)
                       (json-null nil) (json-false nil))
                   (json-read-from-string stdout))
               (error nil))))
    (cond
     ((and (consp res) (consp (alist-get 'error res)))
      (let* ((err (alist-get 'error res))
             (msg (or (alist-get 'message err) "ragweedctl failed"))
             (hint (alist-get 'hint err))
             ;; ragweedctl's own last line on stderr says it for a person (the JSON's hint is
             ;; worded for the HTTP API, and some messages are longer there): preferred when there
             (said (car (last (cl-remove-if-not (lambda (l) (string-prefix-p "ragweedctl: " l))
                                                (split-string stderr "\n"))))))
        (ragweed--fail "%s" (cond (said (substring said (length "ragweedctl: ")))
                                  ((and (stringp hint) (not (string-empty-p hint))) (concat msg " — " hint))
                                  (t msg)))))
     ((or (/= code 0) (not (consp res)))
      (ragweed--fail "ragweedctl failed: %s"
                     (if (string-empty-p (string-trim stderr)) (format "exit code %s" code) (string-trim stderr))))
     (t res))))

(defun ragweed--program ()
  (let ((exe (car ragweed-ragweedctl)))
    (or (executable-find exe)
        (ragweed--fail "cannot run %s: not found; is ragweedd installed? Set `ragweed-ragweedctl'" exe))))

(defun ragweed--call (args)
  "Run ragweedctl --json ARGS and wait; the parsed answer."
  (let ((program (ragweed--program))
        (errfile (make-temp-file "ragweed-err")))
    (unwind-protect
        (with-temp-buffer
          (let* ((coding-system-for-read 'utf-8)
                 (code (apply #'call-process program nil (list t errfile) nil (ragweed--argv args))))
            (ragweed--parse code (buffer-string)
                            (with-temp-buffer (insert-file-contents errfile) (buffer-string)))))
      (delete-file errfile))))

(defun ragweed--call-async (args callback)
  "Run ragweedctl --json ARGS; CALLBACK gets the parsed answer at its end.
Errors are shown as a message: a sentinel has no command loop to report them."
  (let* ((program (ragweed--program))
         (out (generate-new-buffer " *ragweed-out*"))
         (err (generate-new-buffer " *ragweed-err*")))
    (make-process
     :name "ragweedctl" :buffer out :stderr err :noquery t
     :coding 'utf-8 :connection-type 'pipe
     :command (cons program (ragweed--argv args))
     :sentinel
     (lambda (proc _event)
       (unless (process-live-p proc)
         (unwind-protect
             (condition-case e
                 (funcall callback (ragweed--parse (process-exit-status proc)
                                                   (with-current-buffer out (buffer-string))
                                                   (with-current-buffer err (buffer-string))))
               (error (message "%s" (error-message-string e))))
           (kill-buffer out)
           (kill-buffer err)))))))

;;;; places

(defun ragweed--val (key alist)
  (alist-get key alist))

(defun ragweed-target (uri)
  "A hit's URI as a plist (:path :line :page :uri); see docs/api.md for its forms."
  (when (and (stringp uri) (string-match "\\`file://\\([^#]*\\)\\(?:#\\(.*\\)\\)?\\'" uri))
    (let* ((frag (or (match-string 2 uri) ""))
           ;; percent-decoded to bytes, then to a file name: a name that is not UTF-8 keeps its bytes
           (path (decode-coding-string (url-unhex-string (match-string 1 uri))
                                       (or file-name-coding-system default-file-name-coding-system 'utf-8))))
      (list :uri uri :path path
            :line (and (string-match "\\`L\\([0-9]+\\)" frag) (string-to-number (match-string 1 frag)))
            :page (and (string-match "\\`page=\\([0-9]+\\)" frag) (string-to-number (match-string 1 frag)))))))

(defun ragweed--fill (template target)
  (mapcar (lambda (arg)
            (replace-regexp-in-string
             "{\\(path\\|page\\|uri\\)}"
             (lambda (m) (format "%s" (plist-get target (intern (concat ":" (match-string 1 m))))))
             arg t t))
          template))

(defun ragweed--system-opener ()
  (if (eq system-type 'darwin) "open" "xdg-open"))

(defun ragweed--pdf-command (target)
  (or (and ragweed-pdf-viewer (ragweed--fill ragweed-pdf-viewer target))
      (and (not (eq system-type 'darwin)) (executable-find "xdg-mime")
           (let ((app (downcase (with-output-to-string
                                  (with-current-buffer standard-output
                                    (call-process "xdg-mime" nil t nil "query" "default" "application/pdf"))))))
             (cl-loop for (word binaries args) in ragweed-pdf-viewers
                      for exe = (and (string-match-p (regexp-quote word) app)
                                     (cl-find-if #'executable-find binaries))
                      when exe return (cons exe (ragweed--fill args target)))))
      ;; opens at its first page: no system opener passes a page on
      (list (ragweed--system-opener) (plist-get target :path))))

(defun ragweed--run-detached (argv)
  (unless (executable-find (car argv))
    (ragweed--fail "cannot run %s: not found" (car argv)))
  ;; destination 0: not waited for, and not killed when Emacs exits
  (apply #'call-process (car argv) nil 0 nil (cdr argv)))

(defun ragweed--open-external (target)
  (unless (file-exists-p (plist-get target :path))
    (ragweed--fail "%s is gone (moved or deleted since it was indexed)" (plist-get target :path)))
  (let ((argv (if (and (plist-get target :page) (string-match-p "\\.pdf\\'" (downcase (plist-get target :path))))
                  (ragweed--pdf-command target)
                (list (ragweed--system-opener) (plist-get target :path)))))
    (ragweed--run-detached argv)
    (message "%s" (format "ragweed: opened %s%s with %s" (file-name-nondirectory (plist-get target :path))
                          (if (plist-get target :page) (format " at page %d" (plist-get target :page)) "")
                          (car argv)))))

(defun ragweed-open (target &optional other-window)
  "Open TARGET (see `ragweed-target') at its place.
A text file at its line (in another window with OTHER-WINDOW), anything
else through a viewer or the system opener."
  (if (not (plist-get target :line))
      (ragweed--open-external target)
    (unless (file-exists-p (plist-get target :path))
      (ragweed--fail "%s is gone (moved or deleted since it was indexed)" (plist-get target :path)))
    (funcall (if other-window #'find-file-other-window #'find-file) (plist-get target :path))
    (goto-char (point-min))
    (forward-line (1- (plist-get target :line)))))

;;;; rows

(defun ragweed--strength (h)
  (let ((rel (ragweed--val 'rel_score h)))
    (when (and (numberp rel) (ragweed--val 'score h))
      (cond ((>= rel 0.67) "strong") ((>= rel 0.33) "partial") (t "weak")))))

(defun ragweed--place (h)
  (let ((lines (ragweed--val 'lines h)) bits)
    (when-let ((m (ragweed--val 'member h))) (push (format "in %s" m) bits))
    (when-let ((p (ragweed--val 'page_label h))) (push (format "p. %s" p) bits))
    (when-let ((s (ragweed--val 'sheet h))) (push (format "sheet %s" s) bits))
    (when-let ((s (ragweed--val 'section h))) (push (format "§ %s" s) bits))
    (when (and (consp lines) (not (ragweed--val 't_start h)))
      (push (if (equal (car lines) (car (last lines))) (format "line %s" (car lines))
              (format "lines %s-%s" (car lines) (car (last lines))))
            bits))
    (string-join (nreverse bits) ", ")))

(defun ragweed--oneline (s)
  ;; a newline or another control character in a name or snippet would break the row
  (replace-regexp-in-string "[[:cntrl:]]" " " (format "%s" (or s ""))))

(defun ragweed--name (h)
  (format "%s/%s" (or (ragweed--val 'collection h) "?")
          (or (ragweed--val 'source_rel_path h) (ragweed--val 'filename h)
              (file-name-nondirectory (or (ragweed--val 'source_file h) "?")))))

(defun ragweed--snippet (h chars)
  (truncate-string-to-width
   (replace-regexp-in-string "[[:space:]]+" " " (ragweed--oneline (or (ragweed--val 'snippet h) (ragweed--val 'text h))))
   chars nil nil "…"))

(defun ragweed-row (n h)
  "Hit H as the one line ragweedctl prints for it, numbered N."
  (let ((label (ragweed--strength h)) (where (ragweed--place h)))
    (ragweed--oneline (format "[%d] %s%s%s  %s" n (if label (concat label "  ") "") (ragweed--name h)
                              (if (string-empty-p where) "" (concat "  " where)) (ragweed--snippet h 160)))))

;;;; results

(cl-defstruct (ragweed--location (:constructor ragweed--make-location (target group)))
  "A place Emacs does not show itself (a PDF page, a recording): opened externally."
  target group)

(cl-defmethod xref-location-group ((l ragweed--location)) (ragweed--location-group l))
(cl-defmethod xref-location-line ((_l ragweed--location)) nil)
(defconst ragweed--xref-previews
  '(xref-next-line xref-prev-line xref-next-group xref-prev-group xref-show-location-at-point)
  "xref commands that show a location in passing: no viewer per line.")

(cl-defmethod xref-location-marker ((l ragweed--location))
  ;; There is no buffer position to go to. xref shows a user-error as a message and stays where it
  ;; is, which is what opening a file in another program should look like.
  (let ((target (ragweed--location-target l)))
    (user-error "%s" (if (memq this-command ragweed--xref-previews)
                         (format "ragweed: RET opens %s%s" (file-name-nondirectory (plist-get target :path))
                                 (if (plist-get target :page) (format " at page %d" (plist-get target :page)) ""))
                       (ragweed--open-external target)))))

(defun ragweed--xrefs (hits uri-of)
  (let ((n 0))
    (mapcar (lambda (h)
              (let* ((target (ragweed-target (funcall uri-of h)))
                     (summary (ragweed--oneline (format "[%d] %s  %s  %s" (cl-incf n) (or (ragweed--strength h) "")
                                                        (ragweed--place h) (ragweed--snippet h 200)))))
                (xref-make summary
                           (if (plist-get target :line)
                               (xref-make-file-location (plist-get target :path) (plist-get target :line) 0)
                             (ragweed--make-location target (ragweed--name h))))))
            hits)))

(defun ragweed--show-xref (hits uri-of)
  (let* ((xrefs (ragweed--xrefs hits uri-of))
         (fetcher (lambda () xrefs)))
    (if (fboundp 'xref-show-xrefs)  ; Emacs 29
        (xref-show-xrefs fetcher nil)
      (funcall xref-show-xrefs-function fetcher `((window . ,(selected-window)))))))

(defun ragweed--pick (prompt hits uri-of)
  "Choose one of HITS with `completing-read' (best first, as listed) and open it."
  (let* ((n 0)
         (rows (mapcar (lambda (h) (cons (ragweed-row (cl-incf n) h) h)) hits))
         (table (lambda (string pred action)
                  (if (eq action 'metadata)
                      '(metadata (category . ragweed) (display-sort-function . identity)
                                 (cycle-sort-function . identity))
                    (complete-with-action action rows string pred))))
         (choice (completing-read prompt table nil t))
         (hit (cdr (assoc choice rows))))
    (when hit
      (let ((target (ragweed-target (funcall uri-of hit))))
        (unless target (ragweed--fail "cannot open %s" (funcall uri-of hit)))
        (ragweed-open target)))))

(defun ragweed--want-xref (flip)
  (let ((xref (eq ragweed-results 'xref))) (if flip (not xref) xref)))

(defun ragweed--read (prompt)
  (let ((q (string-trim (read-string prompt))))
    (if (string-empty-p q) (ragweed--fail "nothing to search for") q)))

;;;###autoload
(defun ragweed-search (query &optional flip)
  "Search the ragweedd index for QUERY and open the chosen hit at its place.
With a prefix argument (FLIP), use xref instead of `completing-read'
\(or the other way round, see `ragweed-results')."
  (interactive (list (ragweed--read "ragweed search: ") current-prefix-arg))
  (let* ((res (ragweed--call (append '("search") (ragweed--filters) (list "--" query))))
         (hits (alist-get 'results res)))
    (if (null hits)
        (message "ragweed: no results for %S" query)
      (if (ragweed--want-xref flip)
          (ragweed--show-xref hits (lambda (h) (alist-get 'uri h)))
        (ragweed--pick (format "ragweed (%s): " query) hits (lambda (h) (alist-get 'uri h)))))))

;;;; answers

(defun ragweed--source-uri (s)
  ;; the quoted sentence's own line or page when there is one, else the passage's
  (or (alist-get 'uri (alist-get 'quote s)) (alist-get 'uri s)))

(defvar-local ragweed--sources nil "The answer's sources by their number.")

(defvar ragweed-answer-mode-map
  (let ((map (make-sparse-keymap)))
    (set-keymap-parent map special-mode-map)
    (define-key map (kbd "RET") #'ragweed-open-source)
    (define-key map (kbd "TAB") #'forward-button)
    map))

(define-derived-mode ragweed-answer-mode special-mode "ragweed"
  "An answer from ragweedd; RET on a [N] opens that source.")

(defun ragweed-open-source (&optional n)
  "Open source N of the answer: the [N] at point, else the first one on the line."
  (interactive)
  (let* ((n (or n (get-text-property (point) 'ragweed-n)
                (save-excursion
                  (beginning-of-line)
                  (and (re-search-forward "\\[\\([0-9]+\\)\\]" (line-end-position) t)
                       (string-to-number (match-string 1))))))
         (s (and n (alist-get n ragweed--sources))))
    (unless s (ragweed--fail "no source under the cursor: put it on a [N]"))
    (let ((target (ragweed-target (ragweed--source-uri s))))
      (unless target (ragweed--fail "cannot open %s" (ragweed--source-uri s)))
      (ragweed-open target t))))

(defun ragweed--answer-buffer (query res select)
  (let ((buf (get-buffer-create "*ragweed answer*"))
        (sources (alist-get 'sources res)))
    (with-current-buffer buf
      (let ((inhibit-read-only t))
        (erase-buffer)
        (ragweed-answer-mode)
        (insert (ragweed--oneline query) "\n\n" (or (alist-get 'answer res) "") "\n")
        (when sources
          (insert "\nSources (RET on [N] opens it):\n")
          (let ((i 0))
            (dolist (s sources)
              (let ((n (or (alist-get 'n s) (cl-incf i))))
                (push (cons n s) ragweed--sources)
                (insert (ragweed-row n s) "\n")
                (when-let ((q (alist-get 'text (alist-get 'quote s))))
                  (insert "    > " (ragweed--oneline q) "\n"))))))
        (when-let ((note (alist-get 'llm_setup res)))
          (insert "\nnote: " (ragweed--oneline note) "\n"))
        (goto-char (point-min))
        (while (re-search-forward "\\[\\([0-9]+\\)\\]" nil t)
          (let ((n (string-to-number (match-string 1))))
            (when (alist-get n ragweed--sources)
              (make-text-button (match-beginning 0) (match-end 0) 'ragweed-n n
                                'action (lambda (b) (ragweed-open-source (button-get b 'ragweed-n)))
                                'help-echo "open this source"))))
        (goto-char (point-min))))
    (if select (pop-to-buffer buf) (display-buffer buf))
    buf))

;;;###autoload
(defun ragweed-ask (query &optional flip)
  "Ask the ragweedd index QUERY; the answer goes to *ragweed answer*.
With a prefix argument (FLIP), the sources are also listed with xref
\(see `ragweed-results').  The answer comes back while you keep
working; returns the ragweedctl process."
  (interactive (list (ragweed--read "ragweed ask: ") current-prefix-arg))
  (message "ragweed: asking…")
  (let ((win (selected-window)) (buf (current-buffer)))
    (ragweed--call-async
     (append '("ask") (ragweed--filters) (list "--" query))
     (lambda (res)
       ;; the answer takes the cursor only from someone still where they asked: it arrives while
       ;; they may have gone on typing elsewhere
       (ragweed--answer-buffer query res (and (eq (selected-window) win) (eq (window-buffer win) buf)
                                              (not (minibufferp))))
       (cond ((null (alist-get 'sources res)) (message "ragweed: no sources found for %S" query))
             ((ragweed--want-xref flip)
              (ragweed--show-xref (alist-get 'sources res) #'ragweed--source-uri))
             (t (message "ragweed: answered; RET on a [N] in *ragweed answer* opens that source")))))))

(provide 'ragweed)
;;; ragweed.el ends here
