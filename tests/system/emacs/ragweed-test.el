;;; ragweed-test.el --- ERT tests of editors/emacs/ragweed.el against a real daemon -*- lexical-binding: t; -*-

;; Run by tests/system/test_editor_emacs.py, one test per Emacs: the daemon runs, its state
;; directory is in RAGWEED_STATE_DIR (as in a user's session), and RAGWEED_TEST_EXPECT names a JSON
;; file with what the daemon's API answered for the same searches (the expected hits, best first)
;; and the paths the error tests use.  PDF viewers are recorders on PATH that write their
;; arguments to the records folder.

;;; Code:

(require 'ert)
(require 'json)
(require 'ragweed)

(defun ragweed-test--expect (key)
  (let ((json-object-type 'alist) (json-array-type 'list) (json-key-type 'symbol))
    (alist-get key (json-read-file (getenv "RAGWEED_TEST_EXPECT")))))

(defun ragweed-test--nth-hit (key n)
  (nth n (ragweed-test--expect key)))

(defun ragweed-test--wait (pred what)
  "Wait (handling process output and sentinels) until PRED is non-nil."
  (let ((end (+ (float-time) 240)))
    (while (and (not (funcall pred)) (< (float-time) end))
      (accept-process-output nil 0.05))
    (or (funcall pred) (error "Timed out waiting for %s" what))))

(defun ragweed-test--recorded (program)
  "The argument lists PROGRAM was run with (one JSON list per line)."
  (let ((f (expand-file-name (concat program ".jsonl") (ragweed-test--expect 'records))))
    (when (file-exists-p f)
      (let ((json-array-type 'list))
        (mapcar #'json-read-from-string
                (split-string (with-temp-buffer (insert-file-contents f) (buffer-string)) "\n" t))))))

(defmacro ragweed-test--messages (&rest body)
  "Run BODY; the messages it showed, oldest first."
  `(let ((said nil))
     (cl-letf (((symbol-function 'message)
                (lambda (fmt &rest args) (when fmt (push (apply #'format-message fmt args) said)))))
       ,@body)
     (nreverse said)))

(defun ragweed-test--here ()
  "The file and line the selected window shows."
  (with-current-buffer (window-buffer (selected-window))
    (list buffer-file-name (line-number-at-pos (window-point)))))

(ert-deftest ragweed-test-search-completing-read ()
  "The hits as completion candidates, best first; the chosen one opens at its line."
  (let* ((pick (ragweed-test--expect 'deepest))
         (hit (ragweed-test--nth-hit 'cats_hits pick))
         rows sort
         (completing-read-function
          (lambda (prompt table &rest _)
            (should (equal prompt "ragweed (cat number 27): "))
            (setq rows (all-completions "" table)
                  sort (completion-metadata-get (completion-metadata "" table nil) 'display-sort-function))
            (nth pick rows))))
    (ragweed-search "cat number 27")
    (should (= (length rows) (length (ragweed-test--expect 'cats_hits))))
    (should (eq sort #'identity))  ; the daemon's order, not the alphabet's
    (let ((n 0))
      (dolist (row rows) (should (string-prefix-p (format "[%d] " (cl-incf n)) row))))
    (should (string-match-p (regexp-quote (ragweed-test--expect 'deepest_place)) (nth pick rows)))
    (should (equal (ragweed-test--here) (list (alist-get 'path hit) (alist-get 'line hit))))))

(defun ragweed-test--goto-xref (n)
  "In *xref*, visit the item whose summary starts with [N]."
  (with-current-buffer "*xref*"
    (goto-char (point-min))
    (should (re-search-forward (format "^[ \t]*\\(?:[0-9]+:[ \t]*\\)?\\[%d\\] " n) nil t))
    (xref-goto-xref)))

(ert-deftest ragweed-test-search-xref ()
  "With a prefix argument the hits go to *xref*: a text hit opens at its line, a PDF at its page."
  (let* ((pick (ragweed-test--expect 'deepest))
         (hit (ragweed-test--nth-hit 'cats_hits pick))
         (page2 (ragweed-test--expect 'page2))
         (pdf (ragweed-test--nth-hit 'pdf_hits page2)))
    (ragweed-search "cat number 27" t)
    (ragweed-test--goto-xref (1+ pick))
    (should (equal (ragweed-test--here) (list (alist-get 'path hit) (alist-get 'line hit))))
    (ragweed-search "lighthouse keeper lantern" t)
    ;; walking the list with n shows each place in passing: no viewer is started for the PDFs
    (with-current-buffer "*xref*"
      (goto-char (point-min))
      (dotimes (_ (length (ragweed-test--expect 'pdf_hits)))
        (let ((this-command 'xref-next-line)) (xref-next-line))))
    (should-not (ragweed-test--recorded "zathura"))
    (should-not (ragweed-test--recorded "xdg-open"))
    (let ((said (ragweed-test--messages (ragweed-test--goto-xref (1+ page2)))))
      (should (member "ragweed: opened keeper.pdf at page 2 with zathura" said)))
    (ragweed-test--wait (lambda () (ragweed-test--recorded "zathura")) "the PDF viewer")
    (should (equal (ragweed-test--recorded "zathura") (list (list "--page=2" (alist-get 'path pdf)))))
    (should-not (find-buffer-visiting (alist-get 'path pdf)))))  ; not opened in Emacs

(ert-deftest ragweed-test-ask ()
  "The answer in *ragweed answer*; RET on [1] opens the quoted sentence's line beside it."
  (ragweed-ask "how long should green tea steep")
  (ragweed-test--wait (lambda () (get-buffer "*ragweed answer*")) "the answer")
  (select-window (get-buffer-window "*ragweed answer*"))  ; the person moves to the answer
  (with-current-buffer "*ragweed answer*"
    (should (string-match-p "Green tea should steep for two minutes" (buffer-string)))
    (goto-char (point-min))
    (search-forward "[1]")
    (backward-char 2)
    (call-interactively (key-binding (kbd "RET"))))
  (should (equal (ragweed-test--here)
                 (list (expand-file-name "tea.txt" (ragweed-test--expect 'docs)) (ragweed-test--expect 'tea_line))))
  (should (get-buffer-window "*ragweed answer*"))
  ;; with a prefix argument the sources are in *xref* as well
  (kill-buffer "*ragweed answer*")
  (ragweed-ask "how long should green tea steep" t)
  (ragweed-test--wait (lambda () (get-buffer "*xref*")) "the sources in *xref*")
  (with-current-buffer "*xref*"
    (should (string-match-p (regexp-quote (expand-file-name "tea.txt" (ragweed-test--expect 'docs)))
                            (buffer-string)))))

(defun ragweed-test--user-error (fn)
  "The message of the user-error FN signals (a user-error is shown as a message, never a backtrace)."
  (error-message-string (should-error (funcall fn) :type 'user-error)))

(ert-deftest ragweed-test-errors ()
  "Daemon not running, a token that is not the daemon's, no ragweedctl, no hits: one message each."
  (let ((not-running (format "ragweed: ragweedd is not running (no port file at %s) — start it with `ragweedd run`, or install it as a service with `ragweedctl service install`"
                             (expand-file-name "port" (ragweed-test--expect 'not_running)))))
    (should (equal (ragweed-test--user-error
                    (lambda () (let ((ragweed-state-dir (ragweed-test--expect 'not_running))) (ragweed-search "tea"))))
                   not-running))
    (should (string-prefix-p
             (format "ragweed: the server on 127.0.0.1:%d did not prove it knows the API token in %s"
                     (ragweed-test--expect 'port) (expand-file-name "token" (ragweed-test--expect 'bad)))
             (ragweed-test--user-error
              (lambda () (let ((ragweed-state-dir (ragweed-test--expect 'bad))) (ragweed-search "tea"))))))
    (let ((msg (ragweed-test--user-error
                (lambda () (let ((ragweed-ragweedctl (list (ragweed-test--expect 'missing)))) (ragweed-search "tea"))))))
      (should (string-prefix-p (format "ragweed: cannot run %s: not found" (ragweed-test--expect 'missing)) msg))
      (should (string-match-p "ragweed-ragweedctl" msg)))
    (should (equal (ragweed-test--messages
                    (let ((ragweed-path-glob (ragweed-test--expect 'nowhere))) (ragweed-search "tea")))
                   '("ragweed: no results for \"tea\"")))
    ;; the answer comes back in a process sentinel, where an error would be "error in process sentinel"
    (should (equal (ragweed-test--messages
                    (let* ((ragweed-state-dir (ragweed-test--expect 'not_running))
                           (proc (ragweed-ask "tea")))
                      (ragweed-test--wait (lambda () (not (process-live-p proc))) "ragweedctl")
                      (accept-process-output nil 0.2)))
                   (list "ragweed: asking…" not-running)))))

(ert-deftest ragweed-test-state-dir-setting-wins ()
  "`ragweed-state-dir' (ragweedctl's --state-dir) wins over RAGWEED_STATE_DIR, as in ragweedctl."
  (let* ((real (getenv "RAGWEED_STATE_DIR"))
         (process-environment (cons (concat "RAGWEED_STATE_DIR=" (ragweed-test--expect 'not_running))
                                    process-environment))
         (ragweed-state-dir real)
         rows
         (completing-read-function (lambda (_p table &rest _) (setq rows (all-completions "" table)) nil)))
    (ragweed-search "green tea")
    (should (= (length rows) (length (ragweed-test--expect 'tea_hits))))))

;;; ragweed-test.el ends here
